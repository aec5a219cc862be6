"""The BatchRunner: this worker's share of the batches the gateway runs itself.

Every ``batches.poll_interval``, and as soon as it has room again, it claims
the oldest runnable batch (``store.claim``: a lease of ``batches.lease``
seconds, so of the workers and instances sharing the store one runs it, and
another takes it over once the lease lapses), and runs it. It takes another
once every line of the batches it holds has started and a line slot is free:
a worker's lines go out one batch after another, with no slot idle while a
batch waits; a fleet runs as many batches at once as it has workers.

- ``validating`` → ``in_progress``, then its pending lines in order, each
  through ``run_line`` (the gateway's own door for its url: a client call in
  all but the socket), at most ``batches.concurrency`` lines in flight per
  worker across every batch it holds (the share of the worker batch work may
  take, so interactive calls keep the rest). Each answer is written once
  (``store.finish_line``, under the lease); a line the gateway itself turned
  away for now (its cap, a rate limit, a drain) is run again later.
- the lease is renewed every poll interval; a renew that answers None (the
  lease is another's) stops the batch at once and writes nothing more; one
  that shows ``cancelling`` stops its lines and ends it ``cancelled`` with
  what finished; at ``expires_at`` the lines not run become ``batch_expired``
  error lines and it ends ``expired``.
- no pending line left: ``finalizing``, the output and error files
  (``output.py``), ``completed``; then the lease is released.

Stored instants are wall-clock Unix seconds (``clock``); waits are trio's.
Store calls are blocking, so each runs in a worker thread behind a limiter.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

import attrs
import trio

from switchyard.actors.batches import output
from switchyard.actors.batches.calls import store_call
from switchyard.actors.batches.lines import LineAnswer, LineCall, RunLine, new_request_id
from switchyard.actors.batches.records import (
    CANCELLED,
    CANCELLING,
    COMPLETED,
    DONE,
    ERROR,
    EXPIRED,
    FINALIZING,
    IN_PROGRESS,
    PENDING,
    VALIDATING,
    Batch,
    Line,
)
from switchyard.actors.batches.store import BatchStore
from switchyard.actors.errors import AuthenticationError, InternalError
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.config.batches import BatchesConfig

if TYPE_CHECKING:
    from switchyard.config.access import ApiKey

log = logging.getLogger("switchyard.batches")

STORE_THREADS = 2    # store calls at once, each in a worker thread
PAGE = 256           # lines read from the store at a time
RELEASE_WITHIN = 5.0   # seconds a stopping worker gives its release
PURGE_EVERY = 3600.0   # seconds between two purges of expired files and ended batches' lines
PURGE_PAGE = 1000      # files deleted per store call

OwnerKey = Callable[[str], "ApiKey | None"]   # an owner's key now; raises its 401 when it is gone (owner_keys.py)


def keys_off(owner: str) -> None:
    """Without keys every batch runs with none."""
    return None


class _Held:
    """A batch this worker holds the lease of, while it runs it."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.feeding = True                      # some of its lines are still to start
        self.scope = trio.CancelScope()          # cancelled when the lease is another's, or runs out unrenewed
        self.lost = False
        self.cancelling = batch.status == CANCELLING
        self.lines: trio.CancelScope | None = None   # the lines in flight, cancelled by a cancel


class BatchRunner:
    name = "batch_runner"

    def __init__(self, store: BatchStore, config: Callable[[], BatchesConfig], worker: str,
                 run_line: RunLine | None = None, *, owner_key: OwnerKey = keys_off,
                 clock: Callable[[], float] = time.time, to_thread: Any = trio.to_thread.run_sync) -> None:
        """``run_line``: the protocol layer's, set once the App that serves the lines exists (nothing is
        claimed before); ``clock``: wall-clock Unix seconds, for what the store keeps."""
        self.store = store
        self.config = config
        self.worker = worker
        self.run_line = run_line
        self.owner_key = owner_key
        self.clock = clock
        self._to_thread = to_thread
        self._calls = trio.CapacityLimiter(STORE_THREADS)
        self.slots = trio.CapacityLimiter(config().concurrency)   # lines in flight, across the held batches
        self.held: dict[str, _Held] = {}
        self._room = trio.Event()   # set when another batch may be wanted before the next poll

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._purge)
            task_status.started()
            while True:
                config = self.config()
                self.slots.total_tokens = config.concurrency
                self._room = trio.Event()
                try:
                    await self._claim(nursery, config)
                except StoreUnavailable as exc:
                    log.warning("batches: the store cannot say (%s); looking again in %gs", exc, config.poll_interval)
                with trio.move_on_after(config.poll_interval):
                    await self._room.wait()

    async def _purge(self) -> None:
        """Every ``PURGE_EVERY``: the files past their ``expires_at`` (``batches.file_retention``) and the lines
        of ended batches deleted, a bounded page at a time (every worker does it; it is idempotent)."""
        while True:
            await trio.sleep(PURGE_EVERY)
            try:
                purged = PURGE_PAGE
                while purged == PURGE_PAGE:   # a full page: more may be due (each call a checkpoint)
                    purged = await self._call(self.store.purge, self.clock(), PURGE_PAGE)
            except StoreUnavailable as exc:
                log.warning("batches: expired files not purged (%s); trying again in %gs", exc, PURGE_EVERY)

    async def _claim(self, nursery: trio.Nursery, config: BatchesConfig) -> None:
        """Claim batches while a slot is free and no held batch has lines left to start (they would take it)."""
        while self.run_line is not None and config.enabled and self.slots.available_tokens > 0 and \
                not any(held.feeding for held in self.held.values()):
            now = self.clock()
            batch = await self._call(self.store.claim, self.worker, now, now + config.lease)
            if batch is None:
                return
            self.held[batch.id] = _Held(batch)
            nursery.start_soon(self._hold, self.held[batch.id])

    def _fed(self, held: _Held) -> None:
        """``held`` has no line left to start: the next batch may be claimed once a slot is free."""
        if held.feeding:
            held.feeding = False
            self._room.set()

    def _free(self, slot: object) -> None:
        """A line's slot back; with no batch left to start lines, it is room for another batch."""
        self.slots.release_on_behalf_of(slot)
        if not any(held.feeding for held in self.held.values()):
            self._room.set()

    async def _hold(self, held: _Held) -> None:
        batch = held.batch
        crashed = False
        try:
            held.scope.deadline = self._lease_end(batch.lease_until)
            with held.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._renew, held)
                    await self._work(held)
                    nursery.cancel_scope.cancel()
            if held.scope.cancelled_caught and not held.lost:   # its end came unrenewed: the store is away
                log.warning("batches: batch %s's lease ran out unrenewed; stopping it", batch.id)
                held.lost = True
        except Exception:   # a bug, or a store away too long: the lease lapses and a worker tries again
            crashed = True
            log.exception("batches: batch %s stopped on this worker; its lease lapses for another to resume it",
                          batch.id)
        finally:
            self._fed(held)
            del self.held[batch.id]
            if not held.lost and not crashed:
                with trio.move_on_after(RELEASE_WITHIN) as scope:
                    scope.shield = True
                    try:
                        await self._call(self.store.release, batch.id, self.worker)
                    except StoreUnavailable as exc:   # it lapses instead
                        log.warning("batches: batch %s's lease not released (%s)", batch.id, exc)

    async def _work(self, held: _Held) -> None:
        if held.batch.status == VALIDATING:
            held.batch = _reached(held.batch, IN_PROGRESS, self.clock())
            if not await self._update(held):
                return
        expired = self.clock() >= held.batch.expires_at
        if not expired and not held.cancelling:
            expired = await self._run_lines(held)
        self._fed(held)
        if held.cancelling:
            await self._end(held, CANCELLED)
        elif expired:
            await self._expire_pending(held)
            await self._end(held, EXPIRED)
        elif not await self._call(self.store.lines, held.batch.id, PENDING, 0, 1):
            await self._end(held, COMPLETED)
        # else: a line's answer could not be written; the batch is claimed again and the line run again

    async def _run_lines(self, held: _Held) -> bool:
        """Run the pending lines until none is left, a cancel, or the window's end (then True)."""
        window = trio.current_time() + (held.batch.expires_at - self.clock())
        with trio.CancelScope(deadline=window) as scope:
            async with trio.open_nursery() as lines:
                held.lines = lines.cancel_scope
                if held.cancelling:   # seen by a renew before the lines began
                    lines.cancel_scope.cancel()
                after = 0
                while page := await self._call(self.store.lines, held.batch.id, PENDING, after, PAGE):
                    for line in page:
                        slot = object()
                        await self.slots.acquire_on_behalf_of(slot)
                        lines.start_soon(self._line, held, line, slot)
                        after = line.number
                self._fed(held)
        return scope.cancelled_caught

    async def _line(self, held: _Held, line: Line, slot: object) -> None:
        """One line, holding its slot until its answer is written (but not while it waits to be run again)."""
        holding = True
        try:
            while True:
                answer = await self._answer(line, held.batch.owner)
                if answer.retry_after is None:
                    break
                self._free(slot)
                holding = False
                await trio.sleep(max(answer.retry_after, self.config().poll_interval))
                await self.slots.acquire_on_behalf_of(slot)
                holding = True
            with trio.CancelScope(shield=True):   # answered: its result is kept, whatever stops the batch now
                await self._finish_line(held, output.answered(line, answer))
        finally:
            if holding:
                self._free(slot)

    async def _answer(self, line: Line, owner: str) -> LineAnswer:
        """The door's answer to ``line``, under its ``owner``'s key as it is now."""
        assert self.run_line is not None
        request_id, body = new_request_id(), line.body.encode()
        try:
            call = LineCall(line.url, body, request_id, key=self.owner_key(owner))
        except AuthenticationError as err:
            call = LineCall(line.url, body, request_id, refused=err)
        try:
            return await self.run_line(call)
        except Exception:   # a bug of ours: this line's answer is our 500, not a batch stuck on it
            log.exception("batches: line %d of batch %s failed in the gateway", line.number, line.batch_id)
            return LineAnswer(500, InternalError().body(), request_id)

    async def _finish_line(self, held: _Held, line: Line) -> None:
        """Write ``line``'s result. Refused, the lease is another's (only its holder finishes lines): the batch
        stops on this worker at once. A store away is asked again until the lease would have lapsed."""
        if held.lost:
            return
        written = None
        with trio.move_on_after(self.config().lease):
            while written is None:
                try:
                    written = await self._call(self.store.finish_line, line, self.worker)
                except StoreUnavailable as exc:
                    log.warning("batches: line %d of batch %s not written yet (%s)", line.number, line.batch_id, exc)
                    await trio.sleep(self.config().poll_interval)
        if written is False:
            self._lost(held)

    async def _expire_pending(self, held: _Held) -> None:
        after = 0
        while page := await self._call(self.store.lines, held.batch.id, PENDING, after, PAGE):
            for line in page:
                await self._finish_line(held, output.expired(line))
            after = page[-1].number

    async def _end(self, held: _Held, status: str) -> None:
        """Write the output and error files of what finished, then the batch's end (``finalizing`` first on
        the way to ``completed``)."""
        config = self.config()
        if status == COMPLETED:
            held.batch = _reached(held.batch, FINALIZING, self.clock())
            if not await self._update(held):
                return
        done, failed = await self._finished(held.batch.id, DONE), await self._finished(held.batch.id, ERROR)
        batch, made = output.files(held.batch, done, failed, self.clock(), config.file_retention)
        for file, content in made:
            await self._call(self.store.add_file, file, content)
        held.batch = _reached(batch, status, self.clock())
        # The lease gone meanwhile, the files stay: their ids are the batch's (output.file_id), so the worker that
        # took it over writes the same files again, with the same lines, and ends it.
        await self._update(held)

    async def _finished(self, batch_id: str, status: str) -> list[Line]:
        out: list[Line] = []
        while page := await self._call(self.store.lines, batch_id, status, out[-1].number if out else 0, PAGE):
            out += page
        return out

    async def _renew(self, held: _Held) -> None:
        """Every poll interval: the lease extended, and a cancel noticed; a lease that is another's stops all."""
        while True:
            config = self.config()
            await trio.sleep(config.poll_interval)
            try:
                found = await self._call(self.store.renew, held.batch.id, self.worker, self.clock() + config.lease)
            except StoreUnavailable as exc:
                log.warning("batches: batch %s's lease not renewed (%s)", held.batch.id, exc)
                continue
            if found is None:
                self._lost(held)
                return
            held.scope.deadline = self._lease_end(found.lease_until)
            if found.status == CANCELLING and not held.cancelling:
                held.cancelling = True
                held.batch = attrs.evolve(held.batch, status=CANCELLING, times={**held.batch.times, **found.times})
                if held.lines is not None:
                    held.lines.cancel()

    def _lease_end(self, until: float) -> float:
        """The trio instant of the wall-clock ``until``: past it, unrenewed, the batch may be another worker's,
        so this one stops its lines there (a worker cut off from the store never runs on past its lease)."""
        return trio.current_time() + (until - self.clock())

    async def _update(self, held: _Held) -> bool:
        """``held.batch`` written under the lease; False (and the batch let go) when the lease is another's."""
        if await self._call(self.store.update, held.batch, self.worker):
            return True
        self._lost(held)
        return False

    def _lost(self, held: _Held) -> None:
        """The lease is another's: nothing more is written for the batch here, and its lines in flight stop."""
        if not held.lost:
            log.warning("batches: batch %s is no longer this worker's (its lease lapsed); stopping it", held.batch.id)
            held.lost = True
            held.scope.cancel()

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await store_call(self.store, fn, *args, limiter=self._calls, to_thread=self._to_thread)


def _reached(batch: Batch, status: str, at: float) -> Batch:
    """``batch`` in ``status`` since ``at``; a status reached before (a finalize begun by a worker whose lease
    lapsed) keeps its first instant."""
    return attrs.evolve(batch, status=status, times={f"{status}_at": at, **batch.times})
