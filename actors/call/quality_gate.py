"""One call's ``fallback.quality_check``: each buffered answer judged, the last that failed kept.

The relays ask the gate (``Relay.check``) once a buffered chat, Messages or
Responses answer is read whole and before its status goes out. An answer
that passes goes out marked ``x-continuum-quality-check: passed``. One that
fails is kept (the public model id already put back) and the attempt fails
(``failed_attempt``): the route plan moves the call to its chain's
next model. When the route loop ends without an answer that passed, the
RequestActor hands the kept answer to the client (``deliver``): a 200 marked
``failed`` and the check's name, with the call's whole cost, rather than an
error about an answer that exists. The checks are pure
(``actors/routing/quality.py``); docs/quality-checks.md says what they judge.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Awaitable, Callable

import trio
from attrs import frozen

from switchyard.actors.errors import InvalidRequest, UpstreamProtocolError
from switchyard.actors.ledger.meter import CallMeter
from switchyard.actors.ledger.pricing import decimal_text
from switchyard.actors.messages import Call
from switchyard.actors.relay import COST_ESTIMATED_HEADER, COST_HEADER, AttemptFailed, ResponseSink
from switchyard.actors.rename import Rename
from switchyard.actors.routing.failover import Failure, Kind
from switchyard.actors.routing.quality import BadSchema, QualityRules, Verdict, judge, rules_for
from switchyard.config.endpoints import Endpoint

HEADER = b"x-continuum-quality-check"                # passed | failed | unchecked
FAILED_CHECK_HEADER = b"x-continuum-quality-check-failed"   # the check the delivered answer failed
PASSED = (HEADER, b"passed")
JUDGED = frozenset({Endpoint.CHAT, Endpoint.RESPONSES})   # chat: the Messages door's calls too

JUDGE_DEADLINE = 2.0     # seconds one answer's judgment may take
JUDGES = 2               # judgments running at once in a worker (each in a thread)
UNCHECKED = object()     # the judgment did not finish in time
_JUDGES: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("quality_judges")
log = logging.getLogger("switchyard.quality")

Headers = list[tuple[bytes, bytes]]
OnSend = Callable[[], Awaitable[None]]   # what must happen before the answer leaves (a stored Response's owner)


@frozen
class Held:
    """An answer that failed its check, as the client would get it."""

    body: bytes
    headers: Headers        # the attempt's own (content type, route headers), without the cost
    backend: str
    verdict: Verdict
    on_send: OnSend | None


async def _judged(rules: QualityRules, payload: Any, responses: bool) -> Verdict | None | object:
    """``judge`` in a worker thread, within ``JUDGE_DEADLINE``: the schemas and patterns are the client's, and
    one that runs away (a ``$ref`` that fans out, a backtracking ``pattern``) must not stall the event loop. A
    judgment past the deadline is abandoned (its thread ends when it ends; at most ``JUDGES`` run at once in
    a worker, so a run-away one takes a thread, never the loop): ``UNCHECKED``."""
    try:
        limiter = _JUDGES.get()
    except LookupError:
        limiter = trio.CapacityLimiter(JUDGES)
        _JUDGES.set(limiter)
    with trio.move_on_after(JUDGE_DEADLINE):
        return await trio.to_thread.run_sync(functools.partial(judge, rules, payload, responses=responses),
                                             limiter=limiter, abandon_on_cancel=True)
    return UNCHECKED


def failed_attempt(verdict: Verdict, backend: str) -> AttemptFailed:
    """The attempt's end: a failure the route plan moves on from (never to a sibling: the model is at fault)."""
    return AttemptFailed(Failure(Kind.QUALITY_CHECK), UpstreamProtocolError(
        f"Backend '{backend}' answered, but the answer failed the quality check '{verdict.check}': "
        f"{verdict.reason}", code="quality_check_failed", details={"check": verdict.check, "reason": verdict.reason}))


class QualityGate:
    __slots__ = ("rules", "held", "model")

    def __init__(self, rules: QualityRules) -> None:
        self.rules = rules
        self.held: Held | None = None   # the last answer that failed
        self.model: str | None = None   # ... and its model (the RequestActor notes it)

    async def __call__(self, backend: str, body: bytes, payload: Any, headers: Headers, rename: Rename | None,
                       responses: bool = False, on_send: OnSend | None = None) -> Headers:
        """``headers`` marked passed (or unchecked), or keep the answer and raise its failed attempt."""
        verdict = await _judged(self.rules, payload, responses)
        if verdict is UNCHECKED:
            log.warning("quality check: the answer of %r was not judged within %gs (the request's schema or "
                        "patterns run away); it goes out unchecked", backend, JUDGE_DEADLINE)
            return [*headers, (HEADER, b"unchecked")]
        if verdict is None:
            return [*headers, PASSED]
        assert isinstance(verdict, Verdict)
        if rename is not None:
            body = rename.payload(payload, body)
        self.held = Held(body, headers, backend, verdict, on_send)
        raise failed_attempt(verdict, backend)

    async def deliver(self, sink: ResponseSink, meter: CallMeter) -> None:
        """The kept answer to the client: the route loop found none that passed."""
        held = self.held
        assert held is not None
        if held.on_send is not None:
            await held.on_send()
        headers = [*held.headers, (HEADER, b"failed"), (FAILED_CHECK_HEADER, held.verdict.check.encode())]
        if meter.cost is not None:   # every attempt has settled: the call's whole cost
            headers.append((COST_HEADER, decimal_text(meter.cost).encode()))
            if meter.estimated:
                headers.append((COST_ESTIMATED_HEADER, b"true"))
        await sink.start(200, headers)
        await sink.send(held.body)
        await sink.finish()


def applies(call: Call, model: str, online: bool) -> bool:
    """Whether ``fallback.quality_check`` judges this call: routed as one of its models, on a chat, Messages
    or Responses call (``:online`` rounds are the gateway's own and are not judged). Streams included:
    ``empty_reply_retry`` steps aside on them too."""
    return call.endpoint in JUDGED and not online and call.snapshot.fallback.quality_check.applies_to(model)


def gate_for(call: Call, model: str, online: bool) -> QualityGate | None:
    """The gate of an admitted buffered call the check applies to; a schema in it that is no JSON Schema
    is the client's 400 here, before any backend is asked. Streams are not judged (docs/quality-checks.md)."""
    if call.stream or not applies(call, model, online) or not isinstance(call.payload, dict):
        return None
    try:
        rules = rules_for(call.payload, call.snapshot.fallback.quality_check,
                          responses=call.endpoint == Endpoint.RESPONSES, messages=bool(call.ingress))
    except BadSchema as exc:
        raise InvalidRequest(f"{exc.param} {exc.message}", param=exc.param, code="invalid_json_schema") from None
    return QualityGate(rules)
