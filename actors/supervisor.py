"""The root of the actor tree: starts actors in order, restarts crashed ones.

Each actor runs inside its own supervising task. A crash is logged and
counted and the actor restarts after a backoff that doubles up to a ceiling
(and resets once the actor has run for a while), so a bug in one actor never
takes the server down. Its last published view stays readable meanwhile.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, runtime_checkable

import trio

log = logging.getLogger("switchyard.supervisor")


@runtime_checkable
class Actor(Protocol):
    name: str

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None: ...


class Supervisor:
    def __init__(self, nursery: trio.Nursery, *, initial_backoff: float = 0.1,
                 max_backoff: float = 30.0, stable_after: float = 60.0) -> None:
        self.nursery = nursery
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.stable_after = stable_after
        self.restarts: dict[str, int] = {}

    async def start(self, actor: Actor) -> Any:
        """Start ``actor`` and return what it passed to ``task_status.started``."""
        self.restarts.setdefault(actor.name, 0)
        return await self.nursery.start(self._supervise, actor)

    async def _supervise(self, actor: Actor, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        backoff = self.initial_backoff
        status = _StartedOnce(task_status)
        while True:
            began = trio.current_time()
            try:
                await actor.run(task_status=status)
                log.info("actor %s finished", actor.name)
                return
            except Exception:
                if not status.called:
                    raise  # failed before it ever started: the caller must know
                log.exception("actor %s crashed; restarting in %.1fs", actor.name, backoff)
            self.restarts[actor.name] += 1
            if trio.current_time() - began >= self.stable_after:
                backoff = self.initial_backoff
            await trio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)


class _StartedOnce:
    """Forwards the first ``started()`` to the nursery; restarts report nothing."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.called = False

    def started(self, value: Any = None) -> None:
        if not self.called:
            self.called = True
            self.inner.started(value)
