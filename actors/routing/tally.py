"""A feature's counter: counts by key, bumped on the hot path, read by the metrics exposition at scrape time.

Each feature declares its own in its module, with the type of its keys
(``routing/variants.py``'s ``VariantRequests``, ``params.py``'s
``ParamOutcomes``, ``guardrails/verdicts.py``'s ``GuardrailVerdicts``,
``trace.py``'s ``ClientRefRejections``); the Runtime holds one of each and
hands it to the part that counts, and ``protocol/serving/metrics.py`` reads
it back. Plain state, no clock: it lives in the pure core so any module may
declare one.
"""

from __future__ import annotations

from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)


class Tally(Generic[K]):
    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[K, int] = {}

    def add(self, key: K) -> None:
        self._counts[key] = self._counts.get(key, 0) + 1

    def count(self, key: K) -> int:
        return self._counts.get(key, 0)

    def as_dict(self) -> dict[K, int]:
        """Every key counted so far (a copy)."""
        return dict(self._counts)
