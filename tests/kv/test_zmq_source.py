"""The ZMQ reader (protocol/kv/zmq_source.py) against a publisher speaking vLLM's wire (tests/kv/publisher.py) on
127.0.0.1: order, replay, a wrapped ring, a restarted engine, a lost publisher, malformed payloads, a flood."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

import pytest
import trio

from switchyard.actors.kv.events import AllBlocksCleared, BlockRemoved, BlockStored
from switchyard.protocol.kv.zmq_source import ZmqSource
from tests.kv.publisher import VllmPublisher, cleared, removed, settle, stored
from tests.kv.support import RecordingSink, Source, until


@asynccontextmanager
async def reading(publisher: VllmPublisher, sink: RecordingSink, *, replay: bool = True,
                  capacity: int = 1024, interval_ms: int = 200) -> AsyncIterator[ZmqSource]:
    source = ZmqSource("engine-a", Source(publisher.endpoint, replay_endpoint=publisher.replay_endpoint
                                          if replay else None, reconnect_interval_ms=interval_ms),
                       sink, capacity=capacity)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(source.run)
            if publisher.router is not None:
                nursery.start_soon(publisher.serve_replay)
            await publisher.subscribed()
            await until(lambda: source.status.up)
            yield source
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("maps", [False, True], ids=["array form", "map form"])
async def test_batches_arrive_in_order_decoded(maps):
    publisher, sink = VllmPublisher(maps=maps), RecordingSink()
    try:
        async with reading(publisher, sink):
            publisher.publish([stored([11], None, [1, 2]), stored([12], 11, [3, 4])])
            publisher.publish([removed([12])])
            publisher.publish([cleared()])
            await until(lambda: len(sink.batches) == 3)
    finally:
        publisher.close()
    assert sink.log == [("engine-a", "down: connecting"), ("engine-a", "up"),
                        ("engine-a", 0), ("engine-a", 1), ("engine-a", 2)]
    assert [b.events for b in sink.batches] == [
        (BlockStored((11,), None, (1, 2), 2, "GPU"), BlockStored((12,), 11, (3, 4), 2, "GPU")),
        (BlockRemoved((12,), "GPU"),), (AllBlocksCleared(),)]
    assert sink.batches[0].ts == 1.5 and sink.batches[0].data_parallel_rank == 0


async def test_a_dropped_batch_is_recovered_by_replay():
    publisher, sink = VllmPublisher(), RecordingSink()
    try:
        async with reading(publisher, sink) as source:
            publisher.publish([stored([1], None, [1, 2])])
            publisher.publish([stored([2], 1, [3, 4])], send=False)   # lost on the way
            publisher.publish([stored([3], 2, [5, 6])])
            publisher.publish([removed([3])])
            await until(lambda: len(sink.batches) == 4)
    finally:
        publisher.close()
    assert sink.seqs() == [0, 1, 2, 3]
    assert publisher.replays == [1]
    assert (source.status.gaps, source.status.resets) == (1, {})
    assert source.status.replayed >= 2   # 1 and 2 (and 3 when it was in the ring by then: then a duplicate live)


async def test_a_ring_that_no_longer_holds_the_gap_drops_the_entries():
    publisher, sink = VllmPublisher(buffer_steps=2), RecordingSink()
    try:
        async with reading(publisher, sink) as source:
            publisher.publish([stored([1], None, [1, 2])])
            await until(lambda: len(sink.batches) == 1)
            for _ in range(3):
                publisher.publish([stored([9], None, [9, 9])], send=False)   # 1, 2, 3: the ring keeps 3, 4
            publisher.publish([removed([1])])
            publisher.publish([cleared()])
            await until(lambda: sink.seqs()[-1:] == [5])
    finally:
        publisher.close()
    assert sink.since(2) == [("engine-a", 0), ("engine-a", "down: gap"), ("engine-a", "up"),
                             ("engine-a", 4), ("engine-a", 5)]
    assert source.status.resets == {"gap": 1} and publisher.replays == [1]


async def test_a_gap_without_a_replay_endpoint_drops_the_entries():
    publisher, sink = VllmPublisher(replay=False), RecordingSink()
    try:
        async with reading(publisher, sink) as source:
            publisher.publish([stored([1], None, [1, 2])])
            await until(lambda: len(sink.batches) == 1)
            publisher.publish([stored([2], 1, [3, 4])], send=False)
            publisher.publish([stored([3], None, [5, 6])])
            await until(lambda: sink.seqs()[-1:] == [2])
    finally:
        publisher.close()
    assert sink.since(2) == [("engine-a", 0), ("engine-a", "down: gap"), ("engine-a", "up"), ("engine-a", 2)]
    assert source.status.resets == {"gap": 1}


async def test_a_sequence_going_backwards_is_a_restarted_engine():
    publisher, sink = VllmPublisher(), RecordingSink()
    try:
        async with reading(publisher, sink) as source:
            for i in range(3):
                publisher.publish([stored([i + 1], i or None, [i, i])])
            await until(lambda: len(sink.batches) == 3)
            publisher.restart_numbering()
            publisher.publish([stored([7], None, [7, 7])])
            await until(lambda: len(sink.batches) == 4)
    finally:
        publisher.close()
    assert sink.since(2) == [("engine-a", 0), ("engine-a", 1), ("engine-a", 2),
                             ("engine-a", "down: restarted"), ("engine-a", "up"), ("engine-a", 0)]
    assert source.status.resets == {"restarted": 1}


async def test_a_lost_publisher_is_down_after_the_interval_and_up_again_when_back():
    publisher, sink = VllmPublisher(), RecordingSink()
    again: VllmPublisher | None = None
    try:
        async with reading(publisher, sink, interval_ms=200) as source:
            publisher.publish([stored([1], None, [1, 2])])
            await until(lambda: len(sink.batches) == 1)
            publisher.close()
            lost = trio.current_time()
            await until(lambda: not source.status.up)
            assert trio.current_time() - lost >= 0.2   # not before reconnect_interval_ms
            again = VllmPublisher(port=publisher.port, replay_port=publisher.replay_port)
            await again.subscribed()
            await until(lambda: source.status.up)
            again.publish([stored([5], None, [5, 6])])
            await until(lambda: len(sink.batches) == 2)
    finally:
        publisher.close()
        if again is not None:
            again.close()
    assert sink.since(2) == [("engine-a", 0), ("engine-a", "down: disconnected"), ("engine-a", "up"),
                             ("engine-a", 0)]


async def test_a_malformed_payload_is_skipped_and_counted_and_drops_the_entries():
    publisher, sink = VllmPublisher(), RecordingSink()
    try:
        async with reading(publisher, sink) as source:
            publisher.publish([stored([1], None, [1, 2])])
            publisher.publish([], raw=b"\x93\xa3abc\x90\x00")      # ts is a string
            publisher.publish([removed([1])])
            await until(lambda: sink.seqs()[-1:] == [2])
            await settle()
    finally:
        publisher.close()
    assert set(sink.seqs()) <= {0, 2}   # batch 0 goes with the entries if it had not reached the index yet
    assert source.status.malformed == 1 and source.status.last_error == "ts: expected a number, got str"
    # the next batch was unreadable, and may have held removals: the entries dropped, no gap
    assert (source.status.gaps, source.status.resets) == (0, {"malformed": 1})


async def test_a_flood_resyncs_instead_of_growing():
    publisher, sink = VllmPublisher(buffer_steps=10), RecordingSink()
    try:
        async with reading(publisher, sink, capacity=8) as source:
            for i in range(3000):
                publisher.publish([stored([i + 1], None, [i, i])])
            await until(lambda: sink.seqs()[-1:] == [2999], timeout=15)
    finally:
        publisher.close()
    assert source.status.floods >= 1 and source.status.resets.get("flood") == source.status.floods
    assert len(sink.batches) < 3000   # the backlog at each flood was dropped, not kept
    after_last_resync = len(sink.log) - 1 - sink.log[::-1].index(("engine-a", "up"))
    tail = [seq for _, seq in sink.log[after_last_resync + 1:]]
    assert tail == list(range(tail[0], 3000))   # in order again from the resync on
