"""The SSE reader (protocol/kv/sse_source.py) against a small event server on 127.0.0.1 (hypercorn): order,
keep-alives, resuming with Last-Event-ID, a restarted server, a gap, a lost server, malformed events, a flood."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from switchyard.actors.kv.events import BlockRemoved, BlockStored
from switchyard.protocol.kv.sse_source import SseSource
from tests.kv.support import RecordingSink, Source, until
from tests.servers import free_port, lifespan


def batch(*events: dict[str, Any], rank: int | None = 0) -> str:
    return json.dumps({"ts": 2.5, "events": list(events), "data_parallel_rank": rank})


STORED = {"type": "BlockStored", "block_hashes": [21], "parent_block_hash": None, "token_ids": [1, 2],
          "block_size": 2, "lora_id": None, "medium": "GPU", "lora_name": None}
REMOVED = {"type": "BlockRemoved", "block_hashes": [21], "medium": "GPU"}


class EventServer:
    """GET /events: what was published (after Last-Event-ID, when the request names one it holds), then what is
    published while the stream is open; ``end_streams`` ends every open one."""

    def __init__(self) -> None:
        self.history: list[bytes] = []   # every event's bytes, in order
        self.ids: list[int] = []
        self.next_id = 0
        self.last_event_ids: list[str | None] = []
        self.generation = 0   # bumped by end_streams: a stream of an older one ends
        self.changed = trio.Event()

    def publish(self, data: str, *, event_id: int | None = None, raw: bytes | None = None) -> None:
        if raw is not None:   # bytes as they are: no number taken
            self.ids.append(-1)
            self.history.append(raw)
        else:
            seq = self.next_id if event_id is None else event_id
            self.next_id = seq + 1
            self.ids.append(seq)
            self.history.append(f"id: {seq}\ndata: {data}\n\n".encode())
        self._wake()

    def restart_numbering(self) -> None:
        self.history, self.ids, self.next_id = [], [], 0

    def end_streams(self) -> None:
        self.generation += 1
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        headers = dict(scope["headers"])
        last = headers.get(b"last-event-id")
        self.last_event_ids.append(last.decode() if last is not None else None)
        start = 0
        if last is not None and int(last) in self.ids:
            start = self.ids.index(int(last)) + 1
        generation = self.generation
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b": keep-alive\n\nevent: hello\ndata: {}\n\n",
                    "more_body": True})
        sent = start
        while generation == self.generation:
            if sent < len(self.history):
                chunk, sent = b"".join(self.history[sent:]), len(self.history)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            else:
                await self.changed.wait()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@asynccontextmanager
async def serving_on(app: Any, port: int) -> AsyncIterator[None]:
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = config.errorlog = None
    config.graceful_timeout = 0.1
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: serve(app, config, shutdown_trigger=stop.wait,
                                                      task_status=task_status))
        try:
            yield
        finally:
            stop.set()
            app.end_streams()


@asynccontextmanager
async def reading(port: int, sink: RecordingSink, *, capacity: int = 1024) -> AsyncIterator[SseSource]:
    async with httpx.AsyncClient() as client:
        source = SseSource("engine-b", Source(f"http://127.0.0.1:{port}/events", transport="sse",
                                              reconnect_interval_ms=200), sink, client, capacity=capacity)
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(source.run)
                yield source
                nursery.cancel_scope.cancel()


async def test_batches_arrive_in_order_and_keep_alives_are_ignored():
    server, sink, port = EventServer(), RecordingSink(), free_port()
    async with serving_on(server, port), reading(port, sink) as source:
        server.publish(batch(STORED))
        server.publish(batch(REMOVED, rank=1))
        await until(lambda: len(sink.batches) == 2)
    assert sink.log == [("engine-b", "down: connecting"), ("engine-b", "up"), ("engine-b", 0), ("engine-b", 1)]
    assert sink.batches[0].events == (BlockStored((21,), None, (1, 2), 2, "GPU"),)
    assert sink.batches[1].events == (BlockRemoved((21,), "GPU"),) and sink.batches[1].data_parallel_rank == 1
    assert source.status.malformed == 0


async def test_a_stream_that_ends_is_resumed_after_its_last_event_id():
    server, sink, port = EventServer(), RecordingSink(), free_port()
    async with serving_on(server, port), reading(port, sink) as source:
        for _ in range(3):
            server.publish(batch(STORED))
        await until(lambda: len(sink.batches) == 3)
        server.end_streams()
        await until(lambda: len(server.last_event_ids) == 2)
        server.publish(batch(REMOVED))
        await until(lambda: len(sink.batches) == 4)
    assert server.last_event_ids == [None, "2"]
    assert sink.seqs() == [0, 1, 2, 3] and source.status.resets == {}


async def test_a_restarted_server_numbering_from_zero_drops_the_entries():
    server, sink, port = EventServer(), RecordingSink(), free_port()
    async with serving_on(server, port), reading(port, sink) as source:
        server.publish(batch(STORED))
        server.publish(batch(STORED))
        await until(lambda: len(sink.batches) == 2)
        server.restart_numbering()
        server.end_streams()
        server.publish(batch(STORED))
        await until(lambda: len(sink.batches) == 3)
    assert sink.since(2) == [("engine-b", 0), ("engine-b", 1), ("engine-b", "down: restarted"), ("engine-b", "up"),
                             ("engine-b", 0)]
    assert source.status.resets == {"restarted": 1}


async def test_a_gap_drops_the_entries_sse_has_no_replay():
    server, sink, port = EventServer(), RecordingSink(), free_port()
    async with serving_on(server, port), reading(port, sink) as source:
        server.publish(batch(STORED))
        await until(lambda: len(sink.batches) == 1)
        server.publish(batch(STORED), event_id=5)
        await until(lambda: len(sink.batches) == 2)
    assert sink.since(2) == [("engine-b", 0), ("engine-b", "down: gap"), ("engine-b", "up"), ("engine-b", 5)]
    assert source.status.gaps == 1


async def test_a_lost_server_is_down_after_the_interval_and_up_again_when_back():
    server, sink, port = EventServer(), RecordingSink(), free_port()
    async with reading(port, sink) as source:
        async with serving_on(server, port):
            server.publish(batch(STORED))
            await until(lambda: len(sink.batches) == 1)
        lost = trio.current_time()
        await until(lambda: not source.status.up)
        assert trio.current_time() - lost >= 0.2
        again = EventServer()
        async with serving_on(again, port):
            again.publish(batch(STORED))
            await until(lambda: len(sink.batches) == 2)
    assert sink.since(2) == [("engine-b", 0), ("engine-b", "down: disconnected"), ("engine-b", "up"),
                             ("engine-b", 0)]
    assert again.last_event_ids == [None]   # down meanwhile: a fresh start, nothing to resume


class StallingServer(EventServer):
    """After its first stream, accepts each request and never answers it."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.last_event_ids:
            self.last_event_ids.append(dict(scope["headers"]).get(b"last-event-id", b"").decode())
            await trio.sleep_forever()
        await super().__call__(scope, receive, send)


async def test_a_reconnection_the_server_never_answers_is_down_after_the_interval():
    server, sink, port = StallingServer(), RecordingSink(), free_port()
    async with serving_on(server, port), reading(port, sink) as source:
        server.publish(batch(STORED))
        await until(lambda: len(sink.batches) == 1)
        server.end_streams()
        await until(lambda: len(server.last_event_ids) == 2)   # resuming after 0: no answer comes
        await until(lambda: not source.status.up, timeout=2)
    assert server.last_event_ids == [None, "0"]
    assert sink.since(2) == [("engine-b", 0), ("engine-b", "down: disconnected")]


async def test_malformed_events_are_skipped_and_counted_and_the_next_ones_drop_the_entries():
    server, sink, port = EventServer(), RecordingSink(), free_port()
    async with serving_on(server, port), reading(port, sink) as source:
        server.publish(batch(STORED))
        server.publish("", raw=b"data: " + batch(STORED).encode() + b"\n\n")   # no id
        server.publish('{"ts": 1, "events": "none"}')
        server.publish(batch(REMOVED))
        await until(lambda: sink.seqs()[-1:] == [2])
    assert set(sink.seqs()) <= {0, 2}   # batch 0 goes with the entries if it had not reached the index yet
    assert source.status.malformed == 2 and source.status.last_error == "events: expected a list, got str"
    assert source.status.resets == {"malformed": 1}   # id 1 was the next batch: it may have held removals


async def test_a_flood_resyncs_instead_of_growing():
    server, sink, port = EventServer(), RecordingSink(), free_port()
    async with serving_on(server, port), reading(port, sink, capacity=8) as source:
        await until(lambda: source.status.up)
        for _ in range(2000):
            server.publish(batch(STORED))
        await until(lambda: sink.seqs()[-1:] == [1999], timeout=15)
    assert source.status.floods >= 1 and source.status.resets == {"flood": source.status.floods}
    assert len(sink.batches) < 2000
    last_up = len(sink.log) - 1 - sink.log[::-1].index(("engine-b", "up"))
    tail = [seq for _, seq in sink.log[last_up + 1:]]
    assert tail == list(range(tail[0], 2000))
