"""The running gateway: the shared client, the actors, the pool, one Snapshot.

``Runtime.run`` is what the ASGI lifespan starts: it opens the root nursery,
starts the actors in order under the Supervisor, and closes the upstream
client when the server stops.
"""

from __future__ import annotations

from typing import Any

import trio

from actors.discovery import ModelDiscoveryActor
from actors.events import TraceLog
from actors.health import BackendHealthActor
from actors.pool import BackendPool
from actors.supervisor import Supervisor
from config.schema import Snapshot
from protocol.upstream import Upstream


class Runtime:
    def __init__(self, snapshot: Snapshot, upstream: Upstream | None = None) -> None:
        self.snapshot = snapshot
        self.upstream = upstream or Upstream(snapshot)
        self.health = BackendHealthActor(snapshot, self.upstream)
        self.discovery = ModelDiscoveryActor(snapshot, self.upstream)
        self.pool = BackendPool(snapshot)
        self.traces = TraceLog()
        self.supervisor: Supervisor | None = None

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self.supervisor = Supervisor(nursery)
                await self.supervisor.start(self.health)
                await self.supervisor.start(self.discovery)
                task_status.started(self)
        finally:
            with trio.CancelScope(shield=True):
                await self.upstream.aclose()
