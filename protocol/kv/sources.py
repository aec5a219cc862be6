"""KvSources: one reader per configured KV event source, started with the gateway, changed by a reload.

``kv_cache_index.event_sources`` names, per backend, where its engine
publishes: a ``tcp://`` (or ``ipc://``) endpoint read over ZMQ, an
``http(s)://`` one over SSE (``transport`` says which; without it, the
scheme does). Each source runs in a task of its own: one that fails
unexpectedly is logged and started again after its reconnect interval,
without touching the others. ``reconfigure`` starts new sources, stops
removed ones and restarts changed ones (a new reader starts with its
backend down: what the old endpoint said is dropped).
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Any, Mapping

import httpx
import trio

from switchyard.protocol.kv.sink import EventSourceConfig, IndexSink, SourceStatus
from switchyard.protocol.kv.sse_source import HeadersFor, SseSource
from switchyard.protocol.kv.stream import DEFAULT_CAPACITY
from switchyard.protocol.kv.zmq_source import ZmqSource

log = logging.getLogger("switchyard.kv_events")

Reader = ZmqSource | SseSource


def transport_of(config: EventSourceConfig) -> str:
    if config.transport:
        return config.transport
    return "sse" if config.endpoint.startswith(("http://", "https://")) else "zmq"


def _identity(config: EventSourceConfig) -> tuple[Any, ...]:
    return (transport_of(config), config.endpoint, config.replay_endpoint, config.topic,
            config.reconnect_interval_ms)


class KvSources:
    name = "kv_sources"

    def __init__(self, sink: IndexSink, sources: Mapping[str, EventSourceConfig], client: httpx.AsyncClient,
                 *, headers_for: HeadersFor | None = None, capacity: int = DEFAULT_CAPACITY) -> None:
        self.sink = sink
        self.client = client               # SSE sources' requests (the gateway's upstream client)
        self.headers_for = headers_for
        self.capacity = capacity
        self.sources: Mapping[str, EventSourceConfig] = MappingProxyType(dict(sources))
        self.readers: dict[str, Reader] = {}
        self._scopes: dict[str, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None

    def status(self) -> Mapping[str, SourceStatus]:
        """Each running source's counters, by backend."""
        return MappingProxyType({backend: reader.status for backend, reader in self.readers.items()})

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery, self._scopes, self.readers = nursery, {}, {}
                self._sync(restart=())
                task_status.started(self)
                await trio.sleep_forever()   # readers come and go with reconfigure()
        finally:
            self._nursery = None

    def reconfigure(self, sources: Mapping[str, EventSourceConfig]) -> None:
        old, self.sources = self.sources, MappingProxyType(dict(sources))
        changed = {b for b in old.keys() & sources.keys() if _identity(old[b]) != _identity(sources[b])}
        self._sync(restart=changed)

    def _sync(self, restart: Any) -> None:
        if self._nursery is None:
            return   # not running yet: run() starts them
        for backend in list(self._scopes):
            if backend not in self.sources or backend in restart:
                self._scopes.pop(backend).cancel()
                self.readers.pop(backend, None)
        for backend, config in self.sources.items():
            if backend not in self._scopes:
                scope = self._scopes[backend] = trio.CancelScope()
                reader = self.readers[backend] = self._reader(backend, config)
                self._nursery.start_soon(self._keep_reading, backend, config, reader, scope)

    def _reader(self, backend: str, config: EventSourceConfig) -> Reader:
        if transport_of(config) == "sse":
            return SseSource(backend, config, self.sink, self.client, self.headers_for, self.capacity)
        return ZmqSource(backend, config, self.sink, self.capacity)

    async def _keep_reading(self, backend: str, config: EventSourceConfig, reader: Reader,
                            scope: trio.CancelScope) -> None:
        if scope.cancel_called:
            return   # removed by a reload before it began: it tells the index nothing
        with scope:
            while True:
                try:
                    await reader.run()
                except Exception as exc:   # a bug or a library's surprise: this source again, the others untouched
                    log.exception("KV events of %s: the reader failed; starting it again", backend)
                    reader.status.last_error = _described(exc)
                await trio.sleep(config.reconnect_interval_ms / 1000)
                reader = self.readers[backend] = self._reader(backend, config)


def _described(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:   # the reader's own nursery
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
