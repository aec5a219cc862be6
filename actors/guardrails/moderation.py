"""A moderation model as a guardrail's detector: the texts it reads in one ``/v1/moderations`` call.

The call goes through the gateway's own routing (``actors/internal_call.py``:
a ``RequestActor`` on ``Endpoint.MODERATIONS``, selection, retries and
pricing as for any call), ``input`` the list of texts a webhook would get,
in order. It carries no key of its own (a key's allowlist does not keep the
operator's guardrail from its model) and is recorded in the ledger with
``purpose: guardrail`` under the client's key. A result counts in each
category its ``categories`` flags, or, with ``threshold``, each whose
``category_scores`` value is at least the threshold; ``categories`` keeps
only the ones named. A timeout, an error answer, or an answer that is not
one result per text is a failure that ``on_failure`` settles.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Sequence

import trio
from attrs import frozen

from switchyard.actors.errors import GatewayError
from switchyard.actors.internal_call import Kept, run_kept
from switchyard.actors.messages import Call
from switchyard.config.endpoints import Endpoint
from switchyard.config.guardrails import Moderation

log = logging.getLogger("switchyard.guardrails")
PURPOSE = "guardrail"


@frozen
class Judgement:
    flagged: tuple[str, ...] = ()    # the categories that count, in the answer's order (empty: none)
    failure: str | None = None       # none given: timeout | error | malformed


class Malformed(ValueError):
    """A moderations answer the guardrail cannot read."""


async def ask(runtime: Any, actor_class: Any, call: Call, name: str, settings: Moderation,
              texts: Sequence[str]) -> Judgement:
    """The moderation model's judgement of ``texts`` for guardrail ``name``. ``actor_class``: the
    ``RequestActor`` class (passed in: the call package imports the guardrails, not back)."""
    payload: dict[str, Any] = {"model": settings.model, "input": list(texts)}
    sub = Call(model=settings.model, stream=False, body=json.dumps(payload).encode(), payload=payload,
               snapshot=call.snapshot, request_id=call.request_id, trace=call.trace,
               endpoint=Endpoint.MODERATIONS, hops=call.hops)
    actor = actor_class(runtime, sub)
    actor.purpose, actor.billed_key = PURPOSE, call.key
    kept = Kept()
    with trio.move_on_after(settings.timeout) as scope:
        try:
            actor.admit()
        except GatewayError as err:   # a parameter the model's backends refuse: recorded like any refusal
            await actor.refuse(kept, err)
        else:
            await run_kept(actor, kept)
    if scope.cancelled_caught:
        return _failed(name, "timeout", f"no answer within {settings.timeout:g}s")
    if kept.error is not None or kept.status != 200:
        return _failed(name, "error", kept.error.message if kept.error is not None else f"HTTP {kept.status}")
    try:
        return Judgement(flagged(json.loads(kept.body), len(texts), settings))
    except (ValueError, RecursionError) as exc:   # Malformed, or not JSON
        return _failed(name, "malformed", str(exc) if isinstance(exc, Malformed) else "the answer is not JSON")


def flagged(answer: Any, count: int, settings: Moderation) -> tuple[str, ...]:
    """The categories that count in a moderations answer on ``count`` texts (any text flagged in one counts).
    A ``null`` value (a category the model does not judge) counts as not flagged."""
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list) or len(results) != count:
        raise Malformed(f"'results' must hold {count} result(s), one per text")
    field = "categories" if settings.threshold is None else "category_scores"
    out: dict[str, None] = {}
    for i, result in enumerate(results):
        values = result.get(field) if isinstance(result, dict) else None
        if not isinstance(values, dict):
            raise Malformed(f"results[{i}].{field} must be an object")
        for category, value in values.items():
            if value is None or (settings.categories and category not in settings.categories):
                continue
            if _counts(value, settings.threshold, f"results[{i}].{field}.{category}"):
                out[category] = None
    return tuple(out)


def _counts(value: Any, threshold: float | None, path: str) -> bool:
    if threshold is None:
        if not isinstance(value, bool):
            raise Malformed(f"{path} must be true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed(f"{path} must be a number")
    return value >= threshold


def _failed(name: str, failure: str, why: str) -> Judgement:
    log.warning("guardrail %r: the moderation model gave no verdict (%s: %s)", name, failure, why)
    return Judgement(failure=failure)
