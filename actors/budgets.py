"""Time budgets as Trio cancel scopes: one module, so every path obeys the same rules.

A call has one deadline shared by all its attempts (the fallback budget). An
attempt runs inside one cancel scope whose deadline is, in turn:

- ``first_byte`` after the request is sent, until the first data arrives
  (for streams: the first SSE data event; headers alone do not count);
- then ``chunk_interval`` after each data event (streams only);
- never later than the attempt's ``total``, nor the call's deadline.

When the scope fires, ``AttemptBudget.expired()`` says which limit did it and
its value, which the client sees as ``error.details.timeout`` /
``timeout_ms``.
"""

from __future__ import annotations

import trio
from attrs import frozen

from switchyard.actors.errors import UpstreamTimeout
from switchyard.config.resilience import ModelTimeouts
from switchyard.config.schema import Snapshot


@frozen
class Limits:
    first_byte: float
    chunk_interval: float | None    # None: not a stream
    total: float


NO_OVERRIDES = ModelTimeouts()   # a model without overrides: one frozen value, not one built per attempt


def limits_for(snapshot: Snapshot, model: str, stream: bool, fallback_hop: bool,
               backend_cap: float | None = None) -> Limits:
    """The limits of one attempt: model overrides, then the fallback multiplier."""
    t = snapshot.timeouts
    o = t.model_overrides.get(model) or NO_OVERRIDES
    if stream:
        first_byte = o.first_byte or t.streaming.first_byte
        chunk: float | None = o.chunk_interval or t.streaming.chunk_interval
        total = o.total or t.streaming.total
    else:
        first_byte = o.standard_first_byte or t.standard.first_byte
        chunk = None
        total = o.standard_total or t.standard.total
    if fallback_hop:
        m = snapshot.fallback.fallback_policy.fallback_timeout_multiplier
        first_byte, total = first_byte * m, total * m
    if backend_cap is not None:
        total = min(total, backend_cap)
        first_byte = min(first_byte, total)
    return Limits(first_byte, chunk, total)


class CallBudget:
    """The deadline all attempts of one call share, from the call's start."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = trio.current_time() + seconds

    @classmethod
    def for_call(cls, snapshot: Snapshot, model: str, stream: bool) -> "CallBudget":
        base = limits_for(snapshot, model, stream, fallback_hop=False).total
        return cls(base * snapshot.timeouts.streaming_fallback_budget_multiplier)

    def left(self) -> float:
        return self.deadline - trio.current_time()

    def exhausted(self, backend: str | None = None) -> UpstreamTimeout:
        return UpstreamTimeout(
            f"The call's fallback budget ({_fmt(self.seconds)}) ran out before a backend completed the answer",
            details={"timeout": "fallback_budget", "timeout_ms": round(self.seconds * 1000)}, backend=backend)


class AttemptBudget:
    """One attempt's moving deadline, carried by a single cancel scope."""

    def __init__(self, limits: Limits, call: CallBudget) -> None:
        self.limits = limits
        self.call = call
        now = trio.current_time()
        self.total_deadline = min(now + limits.total, call.deadline)
        self.phase = "first_byte"
        self.scope = trio.CancelScope(deadline=min(now + limits.first_byte, self.total_deadline))

    def got_data(self) -> None:
        """Data arrived: from now on only silence between events is limited."""
        if self.limits.chunk_interval is None:
            self.phase = "total"
            self.scope.deadline = self.total_deadline
            return
        self.phase = "chunk_interval"
        self.scope.deadline = min(trio.current_time() + self.limits.chunk_interval, self.total_deadline)

    def expired(self, backend: str) -> UpstreamTimeout:
        """The error for a scope that fired: which limit, and its value."""
        if self.scope.deadline >= self.total_deadline:
            if self.total_deadline >= self.call.deadline:
                return self.call.exhausted(backend)
            kind, seconds = "total", self.limits.total
        elif self.phase == "first_byte":
            kind, seconds = "first_byte", self.limits.first_byte
        else:
            kind, seconds = "chunk_interval", self.limits.chunk_interval or 0.0
        what = {"first_byte": "passed before the first data", "chunk_interval": "passed with no data",
                "total": "passed before the answer was complete"}[kind]
        return UpstreamTimeout(
            f"Backend '{backend}' stream timed out: the {kind} limit ({_fmt(seconds)}) {what} from the backend",
            details={"timeout": kind, "timeout_ms": round(seconds * 1000)}, backend=backend)


def _fmt(seconds: float) -> str:
    return f"{seconds:g}s" if seconds >= 1 else f"{round(seconds * 1000)}ms"
