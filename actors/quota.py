"""QuotaObserver: the provider's own rate-limit headers, one snapshot per backend.

Contract with the request path: call ``observe(backend, headers, now)`` only
once an upstream response's headers have actually arrived (the same moment
time-to-first-byte is measured), whatever its status; a transport error, a
refused connection or a timeout has no headers and observes nothing.
``observe`` never waits and never raises: it keeps only the rate-limit
headers and drops the message into a bounded mailbox (a full mailbox drops
and counts). The ``run`` loop parses each message and replaces that
backend's snapshot, publishing ``view`` wholesale, so readers always see one
immutable mapping.

The headers describe the provider key, not the router backend: one snapshot
per backend, replaced by each newer response, so observations of different
credentials never mix. A response with no recognized header leaves the
previous snapshot to age out by ``routing.quota_aware.ttl``; freshness is
judged by the reader (``actors.routing.quota.observed``), not here.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Iterable, Mapping

import trio

from switchyard.actors.mailbox import Mailbox, queued
from switchyard.actors.routing.quota import Headers, QuotaSnapshot, parse, rate_limit_headers
from switchyard.config.schema import Snapshot

MAILBOX_CAPACITY = 1024

Observation = tuple[str, tuple[tuple[str, str], ...], float]


class QuotaObserver:
    name = "quota"

    def __init__(self, snapshot: Snapshot, capacity: int = MAILBOX_CAPACITY) -> None:
        self.snapshot = snapshot
        self.enabled = snapshot.routing.quota_aware.enabled
        self.mailbox: Mailbox[Observation] = Mailbox("quota", capacity)
        self.view: Mapping[str, QuotaSnapshot] = MappingProxyType({})
        self._names = _names(snapshot)
        self.errors = 0           # observations that could not be taken (never raised to the caller)

    @property
    def dropped(self) -> int:
        """Observations lost to a full mailbox."""
        return self.mailbox.dropped

    # --- the request path -------------------------------------------------

    def observe(self, backend: str, headers: Headers, now: float) -> None:
        """Queue the rate-limit headers of a response that arrived at ``now``; a no-op when disabled."""
        if not self.enabled:
            return
        try:
            kept = rate_limit_headers(headers)
            if kept:
                self.mailbox.tell((backend, kept, now))
        except Exception:  # a malformed header object must not fail the request
            self.errors += 1

    # --- the actor ----------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(self)
        inbox = self.mailbox.inbox
        async for first in inbox:   # and what else is queued, in the same turn (see actors/mailbox.py)
            for backend, headers, now in (first, *queued(inbox, MAILBOX_CAPACITY)):
                self.apply(backend, headers, now)

    def apply(self, backend: str, headers: Iterable[tuple[str, str]], now: float) -> None:
        """Replace ``backend``'s snapshot with what ``headers`` say (an older observation never wins)."""
        if not self.enabled or backend not in self._names:
            return
        snapshot = parse(headers, now)
        if snapshot is None:
            return
        current = self.view.get(backend)
        if current is not None and current.observed_at > now:
            return
        self.view = MappingProxyType({**self.view, backend: snapshot})

    def reconfigure(self, snapshot: Snapshot) -> None:
        """A new revision: disabling forgets every snapshot; removed backends are forgotten.

        A changed TTL needs nothing here: readers judge freshness with the TTL they hold.
        """
        self.snapshot = snapshot
        self.enabled = snapshot.routing.quota_aware.enabled
        self._names = _names(snapshot)
        if not self.enabled:
            self.view = MappingProxyType({})
        elif any(n not in self._names for n in self.view):
            self.view = MappingProxyType({n: s for n, s in self.view.items() if n in self._names})


def _names(snapshot: Snapshot) -> frozenset[str]:
    return frozenset(b.name for b in snapshot.backends if b.enabled)

