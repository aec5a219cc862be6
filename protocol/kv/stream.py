"""One source's batches on their way to the index: their order, the source's state, a bounded channel.

The rules a reader follows whatever its transport (vLLM's publisher
numbers batches 0, 1, 2, ... per process and per data-parallel rank):

- the first batch after (re)connecting starts the sequence, whatever its
  number (subscribers join late);
- the next number is applied; one already applied (sent again by a replay)
  is dropped; a jump is a gap, which the reader may close by replay, else
  the backend's entries are dropped (a missed removal would leave the index
  certain of blocks the engine no longer holds) and the sequence starts
  again; a number at or below one already seen live means the engine
  restarted (its cache is empty, it sends no event saying so): the same;
- the reader hands batches to the index's actor through a bounded channel.
  When the actor has fallen a whole channel behind (a flood), the backlog
  is dropped with the backend's entries instead of growing: it resyncs
  from the batch at hand.

Every state change empties the channel first: batches read before it never
reach the index after it (nor does one the consumer took just before).
"""

from __future__ import annotations

import enum
import logging

import trio

from switchyard.actors.kv.decode import Decoded
from switchyard.actors.kv.events import EventBatch, SourceState
from switchyard.protocol.kv.sink import IndexSink, SourceStatus

DEFAULT_CAPACITY = 1024   # batches read but not yet applied, per source
BURST = 64                # batches a reader decodes before other tasks get a turn

log = logging.getLogger("switchyard.kv_events")


class Verdict(enum.Enum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    GAP = "gap"


class EventStream:
    def __init__(self, backend: str, sink: IndexSink, status: SourceStatus,
                 capacity: int = DEFAULT_CAPACITY) -> None:
        self.backend = backend
        self.sink = sink
        self.status = status
        self._send, self._receive = trio.open_memory_channel[tuple[int, EventBatch]](capacity)
        self._epoch = 0   # batches sent before a state change carry an older one: never applied after it
        self._last: dict[int | None, int] = {}    # rank -> the last sequence number delivered
        self._high: dict[int | None, int] = {}    # rank -> the highest number seen live

    async def run(self) -> None:
        """The consumer: each batch to the index, in order; every batch waiting at its turn, not one per turn
        (a reader hands over up to ``BURST`` a turn: one a turn would call a mere burst a flood)."""
        async for epoch, batch in self._receive:
            while True:
                if epoch == self._epoch:
                    self.sink.apply(self.backend, batch)
                    self.status.batches += 1
                try:
                    epoch, batch = self._receive.receive_nowait()
                except trio.WouldBlock:
                    break

    # --- the source's state ---------------------------------------------------------------

    def down(self, reason: str, *, quiet: bool = False) -> None:
        self._drop_backlog()
        if self.status.up and not quiet:
            error = f"; last error: {self.status.last_error}" if self.status.last_error else ""
            log.warning("KV events of %s: down (%s): the backend is unknown until synced again%s",
                        self.backend, reason, error)
        self.status.up = False
        self.sink.state(SourceState(self.backend, False, reason))

    def up(self) -> None:
        self._drop_backlog()
        self.status.up = True
        self.sink.state(SourceState(self.backend, True))

    def reset(self, reason: str) -> None:
        """The backend's entries dropped (down, then up again at once): ``reason`` counted."""
        times = self.status.resets[reason] = self.status.resets.get(reason, 0) + 1
        if times & (times - 1) == 0:   # the 1st, 2nd, 4th, 8th, ... time: a flood storm is not a log storm
            log.warning("KV events of %s: entries dropped (%s), %d time(s) so far", self.backend, reason, times)
        self.down(reason, quiet=True)
        self.up()

    def forget(self) -> None:
        """A new connection: its first batch starts the sequence."""
        self._last.clear()
        self._high.clear()

    # --- batches ---------------------------------------------------------------------------

    def live(self, decoded: Decoded) -> Verdict:
        """A batch as it arrived: applied, a duplicate, or a gap the reader must close (nothing delivered)."""
        batch = self._counted(decoded)
        rank, seq = batch.data_parallel_rank, batch.seq
        high = self._high.get(rank)
        if high is not None and seq <= high:
            self.reset("restarted")
            self._last.pop(rank, None)
        self._high[rank] = seq
        last = self._last.get(rank)
        if last is not None and seq <= last:
            self.status.duplicates += 1
            return Verdict.DUPLICATE
        if last is not None and seq > last + 1:
            self.status.gaps += 1
            return Verdict.GAP
        self._deliver(batch)
        return Verdict.APPLIED

    def replayed(self, decoded: Decoded) -> bool:
        """A batch of a replay; False when it does not follow on (the publisher's ring no longer holds the
        missing ones)."""
        batch = self._counted(decoded)
        before = self._last.get(batch.data_parallel_rank)
        follows = self.follows(batch)
        if follows and before != self._last.get(batch.data_parallel_rank):
            self.status.replayed += 1
        return follows

    def follows(self, batch: EventBatch) -> bool:
        """Delivered when it is the next of its rank; True unless it comes after a gap."""
        last = self._last.get(batch.data_parallel_rank)
        if last is not None and batch.seq <= last:
            return True
        if last is not None and batch.seq > last + 1:
            return False
        self._deliver(batch)
        return True

    def next_seq(self, rank: int | None) -> int:
        last = self._last.get(rank)
        return 0 if last is None else last + 1

    def unrecoverable(self, decoded: Decoded) -> None:
        """A gap no replay closed: the entries dropped, the sequence started again at this batch."""
        self.reset("gap")
        self._last.pop(decoded.batch.data_parallel_rank, None)
        self._deliver(decoded.batch)

    def malformed(self, seq: int | None, error: str) -> None:
        """A payload that is not a batch: counted and skipped. When it held the next number (of the rank seen
        last), it may have held removals, so the backend's entries are dropped (stale certainty is worse than
        a miss) and its number taken as used: the batches after it follow on."""
        self.status.malformed += 1
        self.status.last_error = error
        if self.status.malformed & (self.status.malformed - 1) == 0:   # 1st, 2nd, 4th, 8th, ...: not every one
            log.warning("KV events of %s: payload skipped (%s); %d so far", self.backend, error,
                        self.status.malformed)
        if seq is not None and len(self._last) == 1:
            rank, last = next(iter(self._last.items()))
            if seq == last + 1:
                self.reset("malformed")
                self._last[rank] = seq

    def _counted(self, decoded: Decoded) -> EventBatch:
        self.status.skipped_events += len(decoded.skipped)
        return decoded.batch

    def _deliver(self, batch: EventBatch) -> None:
        self._last[batch.data_parallel_rank] = batch.seq
        try:
            self._send.send_nowait((self._epoch, batch))
        except trio.WouldBlock:
            self.status.floods += 1
            self.reset("flood")
            self._send.send_nowait((self._epoch, batch))   # the channel is empty now

    def _drop_backlog(self) -> None:
        self._epoch += 1   # and the one the consumer may hold, taken off the channel but not yet applied
        while True:
            try:
                self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return
