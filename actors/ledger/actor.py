"""LedgerActor: call records off the request path and into the store in batches; none lost.

The request path calls ``record``, which never waits and never raises: a
bounded queue, and past its bound an overflow list the actor spills to the
file (``spill.py``) at its next turn. Spilling there and not in ``record``
keeps a write and an fsync off the event loop; the overflow is in memory only
until that turn, and nothing is dropped.

The loop cuts a batch at ``usage.batch_size`` records or ``usage.flush_interval``
after its first (trio's clock) and writes it in a worker thread; a record the
store refuses while it takes others is quarantined, never in the way of the
rest (``writer.py``). When the store is down, the batch goes to the spill
file, the outage is logged once with its reason and counted, and a retry task
tries the store again after 0.5 s, 1 s, 2 s ... 30 s while new batches keep
spilling; the try that succeeds replays the file (the same way, record by
record where it must) and logs the recovery. The spill file is bounded
(``usage.spill_max_bytes``, ``usage.spill_max_age``): a warning once it passes
80 % of its size; what it cannot take is counted and logged as dropped.
``flush`` (the drain path) writes everything queued, or spills it while the
store is down, before it returns.

One turn at a time (the loop's, a retry's, ``flush``'s) holds ``_turn``, so the
spill file is never appended while it is read back. Every store call goes
through one CapacityLimiter(1); reads get their own limiter only from a store
that declares ``thread_safe = True`` (SQLite's one connection must never serve
a read during a write).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol, Sequence, TypeVar

import trio

from switchyard.actors.ledger.quarantine import NAME as QUARANTINE_NAME
from switchyard.actors.ledger.quarantine import QuarantineFile
from switchyard.actors.ledger.record import LedgerRecord, StoreUnavailable, UsageQuery
from switchyard.actors.ledger.spill import Appended, SpillFile
from switchyard.actors.ledger.store import UsageStore
from switchyard.actors.ledger.writer import StoreWriter
from switchyard.actors.mailbox import queued
from switchyard.config.usage import UsageConfig

log = logging.getLogger("switchyard.ledger")

FIRST_RETRY = 0.5        # seconds to the first retry of a failed store; doubles ...
MAX_RETRY = 30.0         # ... up to this
RETENTION_EVERY = 3600.0  # seconds between purges
READERS = 4              # concurrent reads, on a store that says it is thread-safe
SPILL_WARN_AT = 0.8      # of usage.spill_max_bytes: the spill file's size that is warned of once

R = TypeVar("R")


class ToThread(Protocol):
    """trio.to_thread.run_sync's shape: (fn, *args, limiter=), answering what ``fn`` returns."""

    def __call__(self, fn: Callable[..., R], /, *args: Any, limiter: trio.CapacityLimiter) -> Awaitable[R]: ...


class LedgerActor:
    name = "ledger"

    def __init__(self, store: UsageStore, usage: UsageConfig, spill_path: Path, *,
                 clock: Callable[[], float] = time.time, to_thread: ToThread = trio.to_thread.run_sync) -> None:
        """``clock`` is the wall clock retention measures against. ``to_thread`` runs each blocking call
        (tests under autojump_clock run them inline: the mock clock jumps while a worker thread runs)."""
        self.store = store
        self.usage = usage
        self.spill = SpillFile(spill_path, usage.spill_max_bytes)
        self._clock = clock
        self._to_thread = to_thread
        quarantine = QuarantineFile(Path(spill_path).with_name(QUARANTINE_NAME), usage.spill_max_bytes)
        self.writer = StoreWriter(store, quarantine, run_store=self._store, run_file=self._file, clock=clock)
        self._send, self._receive = trio.open_memory_channel[LedgerRecord](usage.queue_size)
        self._pending: list[LedgerRecord] = []    # off the queue, in neither the store nor the spill file yet
        self._overflow: list[LedgerRecord] = []   # told while the queue was full
        self._turn = trio.Lock()
        self._writes = trio.CapacityLimiter(1)
        self._reads = trio.CapacityLimiter(READERS) if getattr(store, "thread_safe", False) is True else self._writes
        self._files = trio.CapacityLimiter(1)
        self._outage = trio.lowlevel.ParkingLot()   # the retry task waits here while the store is up
        self._opened = False
        self._receiving = False       # the loop waits on the queue (see _in_flight)
        self._spill_dirty = False     # the spill file may hold records the store has not taken
        self._replay_offset = 0       # where the next read of the spill file starts
        self._down_since: float | None = None
        self._spill_warned = False    # the spill file passed SPILL_WARN_AT (warned once until it is replayed)
        # counters, for the metrics
        self.spilled = 0              # records appended to the spill file
        self.write_failures = 0       # writes (and outage probes) that failed for the store's own reasons
        self.spill_dropped = 0        # records lost: the spill file was full
        self.expired = 0              # spilled records older than usage.spill_max_age, never written
        self.spill_bytes = 0          # the spill file's size, as last seen
        self.spill_failures = 0       # spill-file appends that failed (their records stay in memory)
        self.purged = 0               # records retention deleted
        self.store_up = False         # opened, and its last write succeeded
        # Told of every record as it is queued (the usage metrics); must not raise or block.
        self.listener: Callable[[LedgerRecord], None] | None = None

    @property
    def written(self) -> int:
        """Records the store took from a batch."""
        return self.writer.written

    @property
    def replayed(self) -> int:
        """Records the store took from the spill file."""
        return self.writer.replayed

    @property
    def quarantined(self) -> int:
        """Records (and spill-file lines) moved to the quarantine file."""
        return self.writer.quarantined

    @property
    def dropped(self) -> int:
        """Records lost: the spill file was full, or the store refused one the quarantine file could not take."""
        return self.spill_dropped + self.writer.dropped

    @property
    def spill_max_bytes(self) -> int:
        return self.spill.max_bytes

    @property
    def queued(self) -> int:
        """Records told and not yet in the store or the spill file."""
        return (self._send.statistics().current_buffer_used + len(self._pending) + len(self._overflow)
                + int(self._in_flight()))

    # --- the request path ---------------------------------------------------

    def record(self, rec: LedgerRecord) -> None:
        """Queue one finished record; never waits, never raises, never drops."""
        try:
            self._send.send_nowait(rec)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self._overflow.append(rec)
        if self.listener is not None:
            try:
                self.listener(rec)
            except Exception:   # metrics must never fail a call that is already over
                log.exception("ledger listener failed on request %s", rec.request_id)

    # --- the actor ----------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Open the store (StoreUnavailable if it cannot be), replay an old spill file, then batch for ever."""
        if not self._opened:
            await self._open()
        self._spill_dirty = self._spill_dirty or await self._file(self.spill.exists)
        if self._spill_dirty:
            self._spill_size(await self._file(self.spill.size))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._recover)
            if self.usage.retention > 0:
                nursery.start_soon(self._retain)
            task_status.started(self)
            while True:
                await self._collect()
                async with self._turn:
                    await self._take_turn()

    async def open(self) -> None:
        """Open the store now (StoreUnavailable if it cannot be); ``run`` then finds it open. The Runtime
        calls this before it starts any task, so a start that fails here fails with this one error, not
        inside a nursery's ExceptionGroup."""
        if not self._opened:
            await self._open()

    async def _open(self) -> None:
        try:
            await self._store(self.store.open)
        except StoreUnavailable:
            raise
        except Exception as exc:
            raise StoreUnavailable(f"the {self.store.name} usage store could not be opened: {_reason(exc)}") from exc
        self._opened = True
        self.store_up = True

    async def _collect(self) -> None:
        """Cut the next batch: its first record, then more until batch_size or flush_interval after the first."""
        if self.store_up and self._spill_dirty:
            return   # a spill file to replay first (an earlier run's, or an overflow)
        if self._pending:
            await trio.sleep(self.usage.flush_interval)   # neither the store nor the file took it: wait a little
            return
        await self._receive_one()
        with trio.move_on_after(self.usage.flush_interval):
            while len(self._pending) < self.usage.batch_size:
                await self._receive_one()

    async def _receive_one(self) -> None:
        """One record off the queue into the batch, then what else is queued (up to batch_size) in the same
        turn: taking one a turn, the ledger fell behind a busy worker, which ends many calls between two of
        its turns (docs/performance-log.md). Between the queue and the batch a record is in neither (the channel
        hands it over and the task runs later): ``_receiving`` lets ``flush`` wait for it to land."""
        self._receiving = True
        try:
            rec = await self._receive.receive()
        finally:
            self._receiving = False
        self._pending.append(rec)
        self._pending.extend(queued(self._receive, self.usage.batch_size - len(self._pending)))

    def _in_flight(self) -> bool:
        """A record has left the queue for the loop, which has not put it in the batch yet."""
        return self._receiving and self._receive.statistics().tasks_waiting_receive == 0

    async def _take_turn(self) -> None:
        await self._spill_overflow()
        if self.store_up:
            await self._write_pending()
        else:
            await self._spill_pending()
        if self.store_up and self._spill_dirty:
            await self._replay(yield_to_waiters=True)

    # --- writing and spilling (under _turn) -----------------------------------

    async def _write_pending(self) -> None:
        """The batch into the store, batch_size at a time; when the store is down, the rest goes to the file."""
        while self._pending:
            batch = self._pending[:self.usage.batch_size]
            settled = await self._write(batch)
            del self._pending[:settled]   # only now: a cancelled turn leaves them for the next
            if settled < len(batch):
                await self._spill_pending()
                return

    async def _spill_pending(self) -> None:
        batch = self._pending[:]
        if batch and await self._spill_batch(batch):
            del self._pending[:len(batch)]

    async def _spill_overflow(self) -> None:
        batch = self._overflow[:]
        if not batch:
            return
        spilled = await self._spill_batch(batch)
        del self._overflow[:len(batch)]
        if not spilled:
            self._pending.extend(batch)   # the file refused them: they wait with the batch, in memory

    async def _spill_batch(self, batch: Sequence[LedgerRecord]) -> bool:
        """``batch`` into the spill file (True), or nothing (False: the file failed; the caller keeps them).
        Records past the file's size bound are dropped, counted and logged: the disk is not the store."""
        try:
            done: Appended = await self._file(self.spill.append, batch, self._replay_offset, self._oldest())
        except Exception as exc:
            self.spill_failures += 1
            if self.spill_failures & (self.spill_failures - 1) == 0:   # at 1, 2, 4, 8 ... failures
                log.error("usage ledger: cannot spill to %s (%s); %d record(s) held in memory", self.spill.path,
                          _reason(exc), self.queued)
            return False
        if done.compacted:
            self._replay_offset = 0   # what was replayed is gone from the file: it is read from its start
        self.spilled += done.appended
        self._spill_dirty = self._spill_dirty or done.appended > 0 or done.size > 0
        self._expired(done.expired, "to make room in")
        if done.refused:
            before = self.spill_dropped
            self.spill_dropped += done.refused
            if before == 0 or before.bit_length() != self.spill_dropped.bit_length():   # at 1, 2, 4, 8 ... drops
                log.error("usage ledger: the spill file %s is full (usage.spill_max_bytes: %d bytes); %d record(s) "
                          "dropped so far", self.spill.path, self.spill.max_bytes, self.spill_dropped)
        self._spill_size(done.size)
        return True

    def _spill_size(self, size: int) -> None:
        self.spill_bytes = size
        if size >= SPILL_WARN_AT * self.spill.max_bytes and not self._spill_warned:
            self._spill_warned = True
            log.warning("usage ledger: the spill file %s holds %d bytes, %d%% of usage.spill_max_bytes; records "
                        "past it will be dropped until the %s store takes them", self.spill.path, size,
                        round(100 * size / self.spill.max_bytes), self.store.name)
        elif size == 0:
            self._spill_warned = False

    def _expired(self, count: int, where: str) -> None:
        if count:
            self.expired += count
            log.warning("usage ledger: %d spilled record(s) older than usage.spill_max_age (%d s) dropped %s %s",
                        count, self.usage.spill_max_age, where, self.spill.path)

    def _oldest(self) -> float:
        return self._clock() - self.usage.spill_max_age

    async def _write(self, batch: Sequence[LedgerRecord], *, replay: bool = False) -> int:
        """``batch`` into the store (``writer.py``); how many of its records, from the first, are settled.
        Fewer than all: the store is down (``_failed`` says so) and the rest waits."""
        settled, failure = await self.writer.write(batch, replay=replay)
        if failure is not None:
            self._failed(failure)
        return settled

    def _failed(self, exc: Exception) -> None:
        self.write_failures += 1
        self.store_up = False
        if self._down_since is None:
            self._down_since = trio.current_time()
            log.warning("usage ledger: the %s store failed (%s); records spill to %s until it is back",
                        self.store.name, _reason(exc), self.spill.path)
            self._outage.unpark_all()

    async def _replay(self, *, yield_to_waiters: bool) -> bool:
        """The spill file into the store, chunk by chunk from where the last replay stopped; the file goes
        once the store has all of it. False if the store failed (the rest waits for the next try)."""
        while True:
            try:
                chunk = await self._file(self.spill.read, self._replay_offset, self.usage.batch_size, self._oldest())
            except Exception as exc:
                log.error("usage ledger: cannot read the spill file %s (%s); it is replayed after the next spill "
                          "or at the next start", self.spill.path, _reason(exc))
                self._spill_dirty = False
                return True
            if chunk.records and await self._write(chunk.records, replay=True) < len(chunk.records):
                return False
            # The chunk is settled: only now its other lines count (a chunk the store cut short is read again).
            for line in chunk.corrupt:
                await self.writer.quarantine_line(line, str(self.spill.path))
            self._expired(chunk.expired, "while replaying")
            self._replay_offset = chunk.end
            if chunk.done:
                try:
                    await self._file(self.spill.remove)
                    self._replay_offset = 0
                    self.writer.replay_done()
                    self._spill_size(0)
                except Exception as exc:   # all of it is in the store: a replay after a restart repeats, skipped
                    log.warning("usage ledger: cannot remove %s (%s)", self.spill.path, _reason(exc))
                self._spill_dirty = False
                return True
            if yield_to_waiters and self._turn.statistics().tasks_waiting:
                return True   # flush or a batch waits: let it in; the rest follows at the next turn

    # --- outages and retention ----------------------------------------------

    async def _recover(self) -> None:
        """While the store is down: try it again after 0.5 s, 1 s, 2 s ... then every 30 s."""
        while True:
            while self.store_up or not self._opened:
                await self._outage.park()
            delay = FIRST_RETRY
            while not self.store_up and self._opened:
                await trio.sleep(delay)
                async with self._turn:
                    await self._retry()
                delay = min(delay * 2, MAX_RETRY)

    async def _retry(self) -> None:
        """One try (under _turn): what is held in memory, then the spill file; the first write is the probe."""
        if self.store_up or not self._opened:
            return
        replayed = self.replayed
        self.store_up = True   # tentatively: the first failed write takes it back
        if not self._pending and not self._spill_dirty:
            failure = await self.writer.down()
            if failure is not None:
                self._failed(failure)
        await self._write_pending()
        if self.store_up and self._spill_dirty:
            await self._replay(yield_to_waiters=True)
        if self.store_up and self._down_since is not None:
            log.info("usage ledger: the %s store is back after %.1fs; %d spilled record(s) replayed so far",
                     self.store.name, trio.current_time() - self._down_since, self.replayed - replayed)
            self._down_since = None

    async def _retain(self) -> None:
        """Purge records older than usage.retention, now and every hour; a failure waits for the next hour."""
        while True:
            before = self._clock() - self.usage.retention
            try:
                gone = await self._store(self.store.purge, before)
            except Exception as exc:
                log.warning("usage ledger: purging records older than %d s failed (%s); next try in an hour",
                            self.usage.retention, _reason(exc))
            else:
                self.purged += gone
                if gone:
                    log.info("usage ledger: %d record(s) older than %d s purged", gone, self.usage.retention)
            await trio.sleep(RETENTION_EVERY)

    # --- drain and close ----------------------------------------------------

    async def flush(self) -> None:
        """Everything recorded so far is in the store (or in the spill file while it is down) on return."""
        async with self._turn:
            while self._in_flight():
                await trio.lowlevel.checkpoint()   # let the loop put it in the batch
            self._pending.extend(queued(self._receive, self.usage.queue_size))
            if self.store_up:
                self._pending.extend(self._overflow)
                self._overflow.clear()
                await self._write_pending()
                if self.store_up and self._spill_dirty:
                    await self._replay(yield_to_waiters=False)
            else:
                await self._spill_overflow()
                await self._spill_pending()

    async def aclose(self) -> None:
        """Flush, then close the store in a thread. Stop ``run`` first; what is told later waits for a
        ``flush``, which then spills it."""
        await self.flush()
        async with self._turn:
            if not self._opened:
                return
            self._opened = False
            self.store_up = False
            try:
                await self._store(self.store.close)
            except Exception as exc:
                log.warning("usage ledger: closing the %s store failed (%s)", self.store.name, _reason(exc))

    # --- the read side (admin API, CLI) -------------------------------------

    async def summary(self, query: UsageQuery) -> list[dict[str, Any]]:
        """Totals per group (see UsageStore); records still queued or spilled are not counted yet."""
        return await self._read(self.store.summary, query)

    async def traffic(self, query: UsageQuery, step: int) -> list[dict[str, Any]]:
        """Counts and latency histograms per time slot and group (see UsageStore); same lag as ``summary``."""
        return await self._read(self.store.traffic, query, step)

    async def records(self, query: UsageQuery, limit: int) -> list[LedgerRecord]:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
        return await self._read(self.store.records, query, limit)

    async def for_request(self, request_id: str) -> list[LedgerRecord]:
        return await self._read(self.store.for_request, request_id)

    async def _read(self, fn: Callable[..., R], *args: Any) -> R:
        if not self._opened:
            raise StoreUnavailable(f"the {self.store.name} usage store is not open")
        return await self._to_thread(fn, *args, limiter=self._reads)

    # --- blocking calls -----------------------------------------------------

    async def _store(self, fn: Callable[..., R], *args: Any) -> R:
        return await self._to_thread(fn, *args, limiter=self._writes)

    async def _file(self, fn: Callable[..., R], *args: Any) -> R:
        return await self._to_thread(fn, *args, limiter=self._files)


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
