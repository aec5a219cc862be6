"""Group commit for the Redis limiter: calls that arrive while a script call is on its way wait and go
together in the next one, so under load N admissions cost one round trip, not N.

A round trip costs the worker CPU whatever it carries (reading, parsing, waking the caller), and the scripts
take a list of calls, so one script call decides a whole batch (each call still all-or-nothing, in
order). With nothing waiting, a call goes at once, alone: at low load a batch adds nothing but
the hand-off to the sending task.

Also here: how late this worker's own event loop runs (``LoopLag``), which the limiter adds to its
operation bound, so that a worker busy with its own requests does not take that wait for a slow Redis.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Awaitable, Callable, Generic, TypeVar

import trio
import trio.lowlevel

Item = TypeVar("Item")


class Slot(Generic[Item]):
    """One call's place in a batch: its part, then its reply or the failure of its batch."""

    __slots__ = ("item", "reply", "error", "done", "abandoned")

    def __init__(self, item: Item) -> None:
        self.item = item
        self.reply: Any = None
        self.error: BaseException | None = None
        self.done = trio.Event()
        self.abandoned = False   # its caller stopped waiting (timed out or cancelled)


async def settle_runnable() -> None:
    """Let what is runnable now run before a wait is judged ended: a reply that arrived as the bound
    passed wakes its reader in the same turn of the loop as the bound's end (in either order), and its
    answer should count. Two turns: one for the loop to collect the I/O, one for its task to run."""
    await trio.lowlevel.checkpoint()
    await trio.lowlevel.checkpoint()


def gives_up(now: float, due: float, bound: float, alive: Callable[[], bool]) -> bool:
    """Whether a wait whose bound was ``due`` ends now: the worker saw it on time (not later than half a
    bound: a reply is not sitting unread) and the server has answered nothing lately."""
    return now - due <= bound / 2 and not alive()


class Watch:
    """A call sent alone from its caller's task: when its bound is due, the watchdog ends it (or gives
    it the bound again, as a queued call's wait is given)."""

    __slots__ = ("scope", "check", "bound", "alive", "done")

    def __init__(self, scope: trio.CancelScope, check: float, bound: float, alive: Callable[[], bool]) -> None:
        self.scope = scope
        self.check = check
        self.bound = bound
        self.alive = alive
        self.done = False


class Batches(Generic[Item]):
    """Calls queued for one script; ``run`` sends what is queued as one call (at most ``most`` items),
    with at most ``lanes`` script calls in flight at once.

    ``send(items)`` returns one reply per item, or raises. ``lost(item, reply)`` is told of every item
    sent whose caller will not act on its reply, though the script may have run it: its batch failed
    (``reply`` None; the caller hears the exception), or its caller stopped waiting before the reply
    came. An item whose caller left before it was sent is dropped unsent. ``others()`` says whether a
    send now would carry work besides its items (see ``_alone``).
    """

    def __init__(self, send: Callable[[list[Item]], Awaitable[list[Any]]],
                 lost: Callable[[Item, Any], None], *, most: int, lanes: int,
                 others: Callable[[], bool] = lambda: False) -> None:
        self._send = send
        self._lost = lost
        self._others = others
        self._most = most
        self._queue: deque[Slot[Item]] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self._lanes = trio.Semaphore(lanes)
        self.batches = 0   # script calls sent
        self.items = 0     # calls they carried
        self.sending = 0   # calls in script calls not answered yet
        self.extended = 0  # waits given their bound again because the worker was late to see them end
        self._watched: list[Watch] = []   # calls sent alone and not yet ended
        self._watch_until = math.inf      # when the watchdog wakes next
        self._watch_lot = trio.lowlevel.ParkingLot()

    async def ask(self, item: Item, bound: float, cap: float, alive: Callable[[], bool] = lambda: False) -> Any:
        """Queue ``item`` and wait for its reply: TooSlowError if none came within ``bound`` seconds,
        the batch's exception if it failed. A wait is given ``bound`` again, up to ``cap`` seconds in
        all, while the server is ``alive()`` (it answered others lately: this one waits behind them) or
        when the worker itself was late to see the bound pass (its loop behind by more than half the
        bound: the reply may be sitting unread)."""
        if not self._queue and self._lanes.value:
            return await self._alone(item, bound, cap, alive)
        slot = Slot(item)
        self._queue.append(slot)
        self._lot.unpark()
        last = trio.current_time() + cap   # the same float every time: compared as such, it is reached
        deadline = min(trio.current_time() + bound, last)
        try:
            while True:
                with trio.move_on_at(deadline):
                    await slot.done.wait()
                if not slot.done.is_set():
                    await settle_runnable()
                if slot.done.is_set():
                    break
                now = trio.current_time()
                if deadline >= last or gives_up(now, deadline, bound, alive):
                    raise trio.TooSlowError
                self.extended += 1
                deadline = min(now + bound, last)
        finally:
            if not slot.done.is_set():
                slot.abandoned = True
        if slot.error is not None:
            raise slot.error
        return slot.reply

    async def _alone(self, item: Item, bound: float, cap: float, alive: Callable[[], bool]) -> Any:
        """Nothing waits and a lane is free: send ``item`` from the caller's own task (no hand-off to a
        sending task and back), under a scope the watchdog cancels when the bound is due, as ``ask``
        would end a queued wait. When ``others()`` (the send carries work of others), the caller's
        leaving waits for the reply or the bound, as a queued call's send goes on without its caller:
        cut off, work that Redis did would be done again. The caller then hears its cancellation, and
        ``lost`` its reply."""
        self._lanes.acquire_nowait()
        now = trio.current_time()
        held = self._others()
        watch = Watch(trio.CancelScope(deadline=now + cap, shield=held), now + bound, bound, alive)
        self._watched.append(watch)
        if watch.check < self._watch_until:   # due before the watchdog would wake
            self._watch_lot.unpark()
        self.batches += 1
        self.items += 1
        self.sending += 1
        try:
            with watch.scope:
                reply = (await self._send([item]))[0]
            if watch.scope.cancelled_caught:
                raise trio.TooSlowError
        except BaseException:   # no answer in time, failed, or its caller left: the script may have run it
            self._lost(item, None)
            raise
        finally:
            watch.done = True
            self.sending -= 1
            self._lanes.release()
        if held:
            try:
                await trio.lowlevel.checkpoint_if_cancelled()
            except BaseException:   # its caller left while it was held: as an abandoned slot's reply
                self._lost(item, reply)
                raise
        return reply

    async def _watchdog(self) -> None:
        """Wakes at the earliest bound due among the calls sent alone (at most one per lane), or when
        one is sent whose bound is due sooner (bounds grow with the loop's lag)."""
        while True:
            self._watched = [w for w in self._watched if not w.done]
            self._watch_until = min((w.check for w in self._watched), default=math.inf)
            with trio.move_on_at(self._watch_until):
                await self._watch_lot.park()
                continue
            await settle_runnable()
            now = trio.current_time()
            for watch in self._watched:
                if watch.done or watch.check > now:
                    continue
                if gives_up(now, watch.check, watch.bound, watch.alive):
                    watch.scope.cancel()
                    watch.done = True
                else:
                    self.extended += 1
                    watch.check = now + watch.bound

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watchdog)
            while True:
                while not self._queue:
                    await self._lot.park()
                await self._lanes.acquire()
                batch: list[Slot[Item]] = []
                while self._queue and len(batch) < self._most:
                    slot = self._queue.popleft()
                    if not slot.abandoned:
                        batch.append(slot)
                if batch:
                    nursery.start_soon(self._one, batch)
                else:
                    self._lanes.release()

    async def _one(self, batch: list[Slot[Item]]) -> None:
        try:
            self.batches += 1
            self.items += len(batch)
            self.sending += len(batch)
            try:
                replies = await self._send([slot.item for slot in batch])
            except Exception as exc:   # the send's own failure (RedisUnavailable): every caller hears it
                for slot in batch:
                    self._lost(slot.item, None)
                    slot.error = exc
                    slot.done.set()
                return
            for slot, reply in zip(batch, replies, strict=False):
                if slot.abandoned:
                    self._lost(slot.item, reply)
                slot.reply = reply
                slot.done.set()
        finally:
            self.sending -= len(batch)
            self._lanes.release()

    @property
    def waiting(self) -> int:
        """Calls queued or on their way: their answers may still ask for work (a release)."""
        return len(self._queue) + self.sending


class LoopLag:
    """How late this worker's event loop wakes a task that is due, as a maximum that decays: a wait
    measured on the worker's clock includes it, whatever it waits for."""

    def __init__(self, tick: float = 0.01, decay: float = 0.9) -> None:
        self.tick = tick
        self.decay = decay
        self.seconds = 0.0

    async def run(self) -> None:
        while True:
            before = trio.current_time()
            await trio.sleep(self.tick)
            late = trio.current_time() - before - self.tick
            self.seconds = max(late, self.seconds * self.decay)
