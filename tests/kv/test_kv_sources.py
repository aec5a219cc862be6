"""KvSources (protocol/kv/sources.py): one reader per configured source, by transport; a reload adds, removes and
restarts them; a reader that fails is started again without touching the others."""

from __future__ import annotations

import httpx
import trio

from switchyard.actors.kv.events import EventBatch
from switchyard.protocol.kv.sources import KvSources, transport_of
from switchyard.protocol.kv.sse_source import SseSource
from switchyard.protocol.kv.zmq_source import ZmqSource
from tests.kv.publisher import VllmPublisher, stored
from tests.kv.support import RecordingSink, Source, until


def test_the_transport_is_the_configured_one_else_the_schemes():
    assert transport_of(Source("http://engine:8000/kv", transport="")) == "sse"
    assert transport_of(Source("https://engine/kv", transport="")) == "sse"
    assert transport_of(Source("tcp://engine:5557", transport="")) == "zmq"
    assert transport_of(Source("http://engine:8000/kv", transport="zmq")) == "zmq"


async def test_a_reload_adds_removes_and_restarts_readers():
    first, second, sink = VllmPublisher(replay=False), VllmPublisher(replay=False), RecordingSink()
    try:
        async with httpx.AsyncClient() as client:
            sources = KvSources(sink, {"a": Source(first.endpoint), "b": Source("http://127.0.0.1:9/kv", "sse")},
                                client)
            with trio.fail_after(10):
                async with trio.open_nursery() as nursery:
                    assert await nursery.start(sources.run) is sources
                    assert isinstance(sources.readers["a"], ZmqSource)
                    assert isinstance(sources.readers["b"], SseSource)
                    await first.subscribed()
                    await until(lambda: sources.status()["a"].up)
                    reader_a = sources.readers["a"]

                    sources.reconfigure({"a": Source(first.endpoint), "c": Source(second.endpoint)})
                    assert set(sources.readers) == {"a", "c"} and sources.readers["a"] is reader_a
                    await second.subscribed()
                    await until(lambda: sources.status()["c"].up)

                    sources.reconfigure({"a": Source(second.endpoint), "c": Source(second.endpoint)})
                    assert sources.readers["a"] is not reader_a   # a new endpoint: a new reader, down first
                    await until(lambda: sources.status()["a"].up)
                    second.publish([stored([1], None, [1, 2])])
                    await until(lambda: sorted(backend for backend, _ in sink.log[-2:]) == ["a", "c"])
                    nursery.cancel_scope.cancel()
    finally:
        first.close()
        second.close()
    assert sink.log[-2:] in ([("a", 0), ("c", 0)], [("c", 0), ("a", 0)])
    assert [entry for entry in sink.log if entry[0] == "a"][:2] == [("a", "down: connecting"), ("a", "up")]
    assert ("a", "down: connecting") in sink.log[3:]   # the restarted reader


class FailingOnce(RecordingSink):
    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def apply(self, backend: str, batch: EventBatch) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("the index refused it")
        super().apply(backend, batch)


async def test_a_reader_that_fails_is_started_again():
    publisher, sink = VllmPublisher(replay=False), FailingOnce()
    try:
        async with httpx.AsyncClient() as client:
            sources = KvSources(sink, {"a": Source(publisher.endpoint, reconnect_interval_ms=100)}, client)
            with trio.fail_after(10):
                async with trio.open_nursery() as nursery:
                    await nursery.start(sources.run)
                    await publisher.subscribed()
                    await until(lambda: sources.status()["a"].up)
                    failing = sources.readers["a"]
                    publisher.publish([stored([1], None, [1, 2])])
                    await until(lambda: sources.readers["a"] is not failing and sources.status()["a"].up)
                    publisher.publish([stored([2], None, [3, 4])])
                    await until(lambda: len(sink.batches) == 1)
                    nursery.cancel_scope.cancel()
    finally:
        publisher.close()
    assert sink.log == [("a", "down: connecting"), ("a", "up"), ("a", "down: connecting"), ("a", "up"), ("a", 1)]
    assert failing.status.last_error == "RuntimeError: the index refused it"
