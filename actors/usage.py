"""Usage records: one per upstream try, kept apart by purpose.

The gateway spends tokens for two reasons: to answer clients and to classify
their requests. Both are real spending, but a classifier call is not a
client request, so the ledger totals each purpose on its own and never sums
them together (``by_purpose()["client"]`` and ``["classifier"]``).

Every classifier try that was sent is recorded, failed ones included: a
malformed answer or a timeout still cost a round trip and, often, billed
tokens. For ``client``, each call's answered attempt is recorded (its
failed attempts are in the call's route events and metrics instead).
Plain Python: the callers own the clock and the concurrency.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Callable

from attrs import frozen

# What became of one try. A malformed 2xx answer is recorded as ``upstream_error`` with
# status 200 (the backend answered, but not usably); ``malformed`` is for callers that
# need to tell it apart on a record of their own.
OUTCOMES = ("ok", "malformed", "upstream_error", "timeout", "error")
RECENT = 1000          # records kept for ``recent``; the totals count every record ever made


@frozen
class UsageRecord:
    purpose: str                      # "client", "classifier", ...: free, never summed across
    request_id: str                   # the client call this try was made for
    key_id: str | None                # the API key's id (never the key), None without keys
    backend: str
    model: str                        # the answer's model when it named one, else the requested one
    input_tokens: int = 0
    output_tokens: int = 0
    latency_seconds: float = 0.0      # from the send to the end of the answer (or of the wait)
    outcome: str = "ok"               # one of OUTCOMES
    status: int | None = None         # the HTTP status of the answer; None when none arrived
    at: float | None = None           # when the try was sent, on the caller's clock

    @property
    def failed(self) -> bool:
        return self.outcome != "ok"


class UsageLedger:
    """Running totals per purpose, and the most recent records for inspection."""

    def __init__(self, keep: int = RECENT) -> None:
        self._recent: deque[UsageRecord] = deque(maxlen=keep)
        self._totals: dict[str, dict[str, int]] = {}
        # Told of every record that is not a client's (those reach the ledger whole, from their call).
        self.on_other: Callable[[UsageRecord], None] | None = None

    def record(self, rec: UsageRecord) -> None:
        self._recent.append(rec)
        if rec.purpose != "client" and self.on_other is not None:
            self.on_other(rec)
        totals = self._totals.get(rec.purpose)
        if totals is None:
            totals = self._totals[rec.purpose] = {"requests": 0, "input_tokens": 0, "output_tokens": 0,
                                                  "errors": 0}
        totals["requests"] += 1
        totals["input_tokens"] += rec.input_tokens
        totals["output_tokens"] += rec.output_tokens
        totals["errors"] += 1 if rec.failed else 0

    def by_purpose(self) -> dict[str, dict[str, int]]:
        """``{purpose: {requests, input_tokens, output_tokens, errors}}``, a copy the caller may keep."""
        return {purpose: dict(totals) for purpose, totals in self._totals.items()}

    def recent(self, n: int) -> list[UsageRecord]:
        """The last ``n`` records (of those kept), oldest first."""
        if n <= 0:
            return []
        kept = len(self._recent)
        return [self._recent[i] for i in range(max(0, kept - n), kept)]


def token_counts(usage: Any) -> tuple[int, int]:
    """(input, output) tokens of an answer's ``usage`` object, in the Chat Completions names or the
    Responses/Anthropic ones; 0 for what it does not say."""
    if not isinstance(usage, dict):
        return 0, 0

    def count(*names: str) -> int:
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
            if isinstance(value, float) and math.isfinite(value) and value >= 0:
                return int(value)
        return 0
    return count("prompt_tokens", "input_tokens"), count("completion_tokens", "output_tokens")


def total_tokens(payload: Any) -> int | None:
    """``usage.total_tokens`` of an answer or chunk (prompt + completion when only those are given)."""
    return usage_total(payload.get("usage") if isinstance(payload, dict) else None)


def usage_total(usage: Any, parts: tuple[str, str] = ("prompt_tokens", "completion_tokens")) -> int | None:
    """A usage object's ``total_tokens``, else the sum of its two ``parts`` (None when neither is whole)."""
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if not isinstance(total, int) or isinstance(total, bool):
        counts = [c for c in (usage.get(part) for part in parts) if isinstance(c, int) and not isinstance(c, bool)]
        if len(counts) < len(parts):
            return None
        total = sum(counts)
    return total if total >= 0 else None

