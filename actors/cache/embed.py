"""The semantic cache's embeddings call: one ``/v1/embeddings`` call through the gateway's own routing.

It runs as a call of its own (a ``RequestActor`` on ``Endpoint.EMBEDDINGS``:
selection, health, circuits, retries and pricing as for any client call),
answered into a sink that keeps the body (``actors/internal_call.py``), and
is recorded in the ledger with ``purpose: cache``, named after the client's
key, priced at the embedding model's pricing. It carries no key of its own, so a key's model allowlist
does not keep the operator's cache from its model. Any way it fails (an
error answer, a timeout, a body that is not one vector of the expected size)
is an ``EmbedFailed`` with a reason (a metric label): the call goes on as a
miss.
"""

from __future__ import annotations

import json
import math
from typing import Any

import trio

from switchyard.actors.internal_call import Kept, run_kept
from switchyard.actors.json_read import loads
from switchyard.actors.messages import Call
from switchyard.config.endpoints import Endpoint

FAULTS = ("timeout", "error", "malformed", "wrong_size")
PURPOSE = "cache"


class EmbedFailed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


async def embed(runtime: Any, actor_class: Any, call: Call, text: str, model: str, dimensions: int | None,
                seconds: float) -> list[float]:
    """The vector of ``text`` from ``model``, within ``seconds``; an ``EmbedFailed`` otherwise. ``actor_class``:
    the client call's ``RequestActor`` class (passed in: the call package imports the cache, not back)."""

    payload: dict[str, Any] = {"model": model, "input": text, **({"dimensions": dimensions} if dimensions else {})}
    body = json.dumps(payload).encode()
    sub = Call(model=model, stream=False, body=body, payload=payload, snapshot=call.snapshot,
               request_id=call.request_id, trace=call.trace, endpoint=Endpoint.EMBEDDINGS, hops=call.hops)
    actor = actor_class(runtime, sub)
    actor.purpose, actor.billed_key = PURPOSE, call.key
    actor.trace.route = "/v1/embeddings"
    kept = Kept()
    with trio.move_on_after(seconds) as scope:
        try:
            actor.admit()
        except Exception as exc:   # a GatewayError: no backend for the model, a parameter refused
            raise EmbedFailed("error", str(exc)) from None
        await run_kept(actor, kept)
    if scope.cancelled_caught:
        raise EmbedFailed("timeout", f"no embedding within {seconds:g}s")
    if kept.error is not None or kept.status != 200:
        message = kept.error.message if kept.error is not None else f"HTTP {kept.status}"
        raise EmbedFailed("error", message)
    return vector_of(kept.body, dimensions)


NUMBERS = frozenset((int, float))   # what JSON gives a number as (a bool's type is bool, not int)


def vector_of(raw: bytes, dimensions: int | None) -> list[float]:
    """The one embedding of an OpenAI embeddings answer, checked.

    Read by msgspec (``json_read.loads``: ``json``'s values and errors), and
    each check run in C over the 1,536 or so values (``map``): ``json`` and a
    generator testing each value in Python cost some 4 million instructions
    a call, more than a whole plain call (docs/performance-log.md, 2026-12-07)."""
    try:
        answer = loads(raw)
        vector = answer["data"][0]["embedding"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise EmbedFailed("malformed", "not an embeddings answer") from None
    if not isinstance(vector, list) or not vector or not NUMBERS.issuperset(map(type, vector)):
        raise _not_numbers()
    try:
        floats = list(map(float, vector))
    except OverflowError:   # an integer past a float's range
        raise _not_numbers() from None
    if not all(map(math.isfinite, floats)):
        raise _not_numbers()
    if dimensions is not None and len(floats) != dimensions:
        raise EmbedFailed("wrong_size", f"{len(floats)} dimensions where semantic.dimensions is {dimensions}")
    return floats


def _not_numbers() -> EmbedFailed:
    return EmbedFailed("malformed", "the embedding is not a list of finite numbers")
