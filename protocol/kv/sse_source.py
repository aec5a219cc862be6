"""KV-cache events over Server-Sent Events (``transport: sse``): a long GET of the source's endpoint.

Each event's ``id:`` is the batch's sequence number and its ``data:`` the
batch as JSON, in vLLM's map shape (``{"ts": ..., "events": [{"type":
"BlockStored", ...}], "data_parallel_rank": 0}``); comments (keep-alives)
and events of another name than ``message`` are ignored. The order rules
are ``stream.py``'s. A stream that ends or fails is opened again at once,
at most once every ``reconnect_interval_ms``, with ``Last-Event-ID``: a server that
resumes after it (the next number comes) keeps the backend's entries; one
that cannot (a jump: a gap, which SSE cannot replay; or a number seen
already: a restarted server) has them dropped. Not connected for longer
than ``reconnect_interval_ms`` (an attempt still waiting for the server's
answer then is given up): the backend is down (unknown), and its next
stream starts it afresh.
"""

from __future__ import annotations

import logging
import math
from typing import Callable

import httpx
import trio

from switchyard.actors.kv.decode import MalformedBatch, decode_json
from switchyard.actors.sse import SSEDecoder, SSEEventTooLarge
from switchyard.protocol.kv.sink import EventSourceConfig, IndexSink, SourceStatus
from switchyard.protocol.kv.stream import BURST, DEFAULT_CAPACITY, EventStream, Verdict

MAX_EVENT_BYTES = 16 * 1024 * 1024   # one batch of a long prompt's blocks is well under a megabyte

HeadersFor = Callable[[str, str], list[tuple[str, str]]]   # (backend, url) -> headers (the backend's key)

log = logging.getLogger("switchyard.kv_events")


class SseSource:
    def __init__(self, backend: str, config: EventSourceConfig, sink: IndexSink, client: httpx.AsyncClient,
                 headers_for: HeadersFor | None = None, capacity: int = DEFAULT_CAPACITY) -> None:
        self.backend = backend
        self.config = config
        self.client = client
        self.headers_for = headers_for
        self.status = SourceStatus("sse", config.endpoint)
        self.stream = EventStream(backend, sink, self.status, capacity)
        self.interval = config.reconnect_interval_ms / 1000
        self._last_id: str | None = None   # the last event's id, sent back as Last-Event-ID
        self._lost_at = -math.inf          # never connected: down from the start
        self._attempt = trio.CancelScope()  # the connection attempt under way (a deadline until connected)

    async def run(self) -> None:
        self.stream.down("connecting")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.stream.run)
            while True:   # one attempt per interval at most, from the start of the last one
                began = trio.current_time()
                with trio.CancelScope() as self._attempt:
                    if self.status.up:   # resuming: an attempt that hangs (no headers yet) ends when the time is up
                        self._attempt.deadline = self._lost_at + self.interval
                    await self._session()
                self._down_if_lost_too_long()
                await trio.sleep_until(began + self.interval)
                self._down_if_lost_too_long()

    def _down_if_lost_too_long(self) -> None:
        if self.status.up and trio.current_time() - self._lost_at >= self.interval:
            self.stream.down("disconnected")

    async def _session(self) -> None:
        headers = [("accept", "text/event-stream"), ("cache-control", "no-cache")]
        if self.headers_for is not None:
            headers += self.headers_for(self.backend, self.config.endpoint)
        if self._last_id is not None and self.status.up:
            headers.append(("last-event-id", self._last_id))
        timeout = httpx.Timeout(connect=self.interval, read=None, write=self.interval, pool=self.interval)
        try:
            async with self.client.stream("GET", self.config.endpoint, headers=headers, timeout=timeout) as response:
                if response.status_code != 200:
                    raise ValueError(f"HTTP {response.status_code}")
                kind = response.headers.get("content-type", "")
                if not kind.startswith("text/event-stream"):
                    raise ValueError(f"content-type {kind or 'missing'}, not text/event-stream")
                self._connected()
                await self._read(response)
                self.status.last_error = "the stream ended"
        except (httpx.HTTPError, ValueError, SSEEventTooLarge) as exc:
            self.status.last_error = str(exc) or type(exc).__name__
        finally:
            if self.status.connected:
                self.status.connected = False
                self._lost_at = trio.current_time()

    def _connected(self) -> None:
        self.status.connected = True
        self._attempt.deadline = math.inf
        if self.status.up and self._last_id is not None:
            return   # resuming after Last-Event-ID: the first event says whether the server could
        self.stream.forget()
        self._last_id = None
        self.stream.up()
        log.info("KV events of %s: reading %s", self.backend, self.config.endpoint)

    async def _read(self, response: httpx.Response) -> None:
        decoder = SSEDecoder(MAX_EVENT_BYTES)
        async for chunk in response.aiter_bytes():
            for n, event in enumerate(decoder.feed(chunk), 1):
                if event.has_data and event.event in (None, "message"):
                    self._event(event.id, event.data)
                if n % BURST == 0:
                    await trio.lowlevel.checkpoint()

    def _event(self, event_id: str | None, data: bytes) -> None:
        try:
            seq = int(event_id or "")
            if seq < 0:
                raise ValueError
        except ValueError:
            self.stream.malformed(None, f"id {event_id!r}: a batch's id is its sequence number (0, 1, ...)")
            return
        self._last_id = event_id
        try:
            decoded = decode_json(seq, data)
        except MalformedBatch as exc:
            self.stream.malformed(seq, str(exc))
            return
        if self.stream.live(decoded) is Verdict.GAP:
            self.stream.unrecoverable(decoded)
