"""A batch store's call from a Trio task: in a worker thread, unless the store is this process's memory.

The SQL stores block (a lock, a round trip), so their calls run in threads
behind a ``CapacityLimiter``. The memory store's calls are a dictionary's
work under a lock no one holds for long: made in the task, they cost no
thread hop, and tests on virtual time see them take no time at all.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import trio

R = TypeVar("R")


async def store_call(store: Any, fn: Callable[..., R], *args: Any, limiter: trio.CapacityLimiter,
                     to_thread: Any = trio.to_thread.run_sync) -> R:
    if getattr(store, "in_memory", False):
        return fn(*args)
    return await to_thread(fn, *args, limiter=limiter)   # type: ignore[no-any-return]
