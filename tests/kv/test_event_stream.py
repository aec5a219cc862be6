"""A source's order rules and its channel to the index (protocol/kv/stream.py), without a transport: batches fed
by hand at exact points, the consumer a task of the test."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

import trio
import trio.testing

from switchyard.actors.kv.decode import Decoded
from switchyard.actors.kv.events import EventBatch
from switchyard.protocol.kv.sink import SourceStatus
from switchyard.protocol.kv.stream import BURST, EventStream, Verdict
from tests.kv.support import RecordingSink


def b(seq: int, rank: int | None = 0) -> Decoded:
    return Decoded(EventBatch(seq, 1.0, (), rank))


@asynccontextmanager
async def consuming(capacity: int = 16) -> AsyncIterator[tuple[EventStream, RecordingSink]]:
    sink = RecordingSink()
    stream = EventStream("e", sink, SourceStatus("zmq", "tcp://x:1"), capacity)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream.run)
        await trio.testing.wait_all_tasks_blocked()
        yield stream, sink
        nursery.cancel_scope.cancel()


async def test_replayed_batches_fill_the_gap_and_live_ones_they_covered_are_duplicates():
    async with consuming() as (stream, sink):
        assert stream.live(b(0)) is Verdict.APPLIED
        assert stream.live(b(3)) is Verdict.GAP
        assert stream.next_seq(0) == 1
        assert stream.replayed(b(1)) and stream.replayed(b(2)) and stream.replayed(b(3)) and stream.replayed(b(4))
        assert stream.live(b(4)) is Verdict.DUPLICATE
        assert stream.live(b(5)) is Verdict.APPLIED
        await trio.testing.wait_all_tasks_blocked()
    assert sink.seqs() == [0, 1, 2, 3, 4, 5]
    assert (stream.status.replayed, stream.status.duplicates, stream.status.resets) == (4, 1, {})


async def test_a_replay_starting_after_the_gap_does_not_follow_on():
    async with consuming() as (stream, sink):
        stream.live(b(0))
        assert stream.live(b(9)) is Verdict.GAP
        assert not stream.replayed(b(5))
        stream.unrecoverable(b(9))
        await trio.testing.wait_all_tasks_blocked()
    assert sink.log[-3:] == [("e", "down: gap"), ("e", "up"), ("e", 9)]


async def test_a_number_at_or_below_one_seen_live_is_a_restart_even_after_a_replay():
    async with consuming() as (stream, sink):
        stream.live(b(0))
        stream.live(b(2))
        stream.replayed(b(1))
        stream.replayed(b(2))
        stream.live(b(3))
        assert stream.live(b(2)) is Verdict.APPLIED   # below the live 3: the engine started again
        await trio.testing.wait_all_tasks_blocked()
    assert stream.status.resets == {"restarted": 1}
    assert sink.log[-3:] == [("e", "down: restarted"), ("e", "up"), ("e", 2)]


async def test_ranks_are_numbered_apart():
    async with consuming() as (stream, sink):
        for seq, rank in [(0, 0), (7, 1), (1, 0), (8, 1)]:
            assert stream.live(b(seq, rank)) is Verdict.APPLIED
        await trio.testing.wait_all_tasks_blocked()
    assert sink.seqs() == [0, 7, 1, 8]


async def test_a_batch_handed_to_the_consumer_before_a_reset_never_reaches_the_index_after_it():
    async with consuming() as (stream, sink):
        stream.live(b(0))     # given to the waiting consumer, which has not run yet
        stream.reset("gap")
        await trio.testing.wait_all_tasks_blocked()
    assert sink.batches == []


async def test_a_full_channel_drops_its_backlog_and_resyncs_from_the_batch_at_hand():
    async with consuming(capacity=2) as (stream, sink):
        for seq in range(4):   # no checkpoint: the consumer gets none of them
            stream.live(b(seq))
        await trio.testing.wait_all_tasks_blocked()
        stream.live(b(4))
        await trio.testing.wait_all_tasks_blocked()
    assert sink.log == [("e", "down: flood"), ("e", "up"), ("e", 3), ("e", 4)]   # 0 was in hand, 1 and 2 queued
    assert stream.status.floods == 1


async def test_a_burst_the_index_keeps_up_with_is_no_flood():
    async with consuming(capacity=256) as (stream, sink):
        for turn in range(40):   # a reader's pace: BURST batches, then the other tasks' turn
            for seq in range(turn * BURST, (turn + 1) * BURST):
                stream.live(b(seq))
            await trio.lowlevel.checkpoint()
        await trio.testing.wait_all_tasks_blocked()
    assert stream.status.floods == 0 and sink.seqs() == list(range(40 * BURST))


async def test_a_malformed_payload_that_was_the_next_drops_the_entries_and_takes_its_number():
    async with consuming() as (stream, sink):
        stream.live(b(0))
        stream.malformed(1, "ts: expected a number, got str")
        assert stream.live(b(2)) is Verdict.APPLIED
        stream.malformed(7, "events: expected a list, got str")
        assert stream.live(b(3)) is Verdict.APPLIED
        await trio.testing.wait_all_tasks_blocked()
    # batch 0 was still on its way to the index when the entries were dropped: gone with them
    assert sink.seqs() == [2, 3] and any(entry[1] == "down: malformed" for entry in sink.log)
    assert stream.status.malformed == 2 and stream.status.last_error == "events: expected a list, got str"
    # the next number's payload may have held removals: the entries were dropped there, once
    assert stream.status.resets == {"malformed": 1}
