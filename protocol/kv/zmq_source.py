"""vLLM's KV-cache events over ZMQ (``--kv-events-config``): a SUB socket on the engine's publisher.

Each message is three frames: the topic, the sequence number (8 bytes, big
endian; from 0 in each engine process) and the msgpack batch. The reader
connects to ``endpoint`` (vLLM binds ``tcp://*:5557``), subscribes to
``topic`` and applies batches in order (``stream.py`` holds the rules).

- A gap (the publisher drops past its high-water mark; so may this side) is
  closed by replay when ``replay_endpoint`` is set: a DEALER asks the
  publisher's ROUTER for every batch from the first missing one
  (``[b"", seq]``) and reads ``[b"", seq, payload]`` frames up to the
  ``ff``x8 terminator, within ``REPLAY_TIMEOUT``. No replay, a timeout, or a
  ring that no longer holds the first missing batch: the backend's entries
  are dropped and the stream goes on from the batch at hand.
- The connection is watched through libzmq's socket monitor; libzmq
  reconnects every ``reconnect_interval_ms``, and ZMTP heartbeats end a
  connection whose peer stopped answering. Lost for longer than
  ``reconnect_interval_ms``: the backend is down (unknown). Connected again:
  its entries are dropped and it is up, from the first batch read (vLLM's
  numbering carries no process identity, so a restarted engine cannot be
  told from a network blip; a stale hit is worse than a miss). An idle
  engine publishes nothing: silence on a live connection is no fault.
"""

from __future__ import annotations

import logging
import math
from typing import Any, cast

import trio
import zmq
from zmq.utils.monitor import recv_monitor_message

from switchyard.actors.kv.decode import Decoded, MalformedBatch, decode_msgpack
from switchyard.protocol.kv import zmq_trio
from switchyard.protocol.kv.sink import EventSourceConfig, IndexSink, SourceStatus
from switchyard.protocol.kv.stream import BURST, DEFAULT_CAPACITY, EventStream, Verdict

REPLAY_TIMEOUT = 1.0      # seconds for the whole replay (vLLM serves one between two batches: ~0.1 s)
RECEIVE_HWM = 10_000      # messages libzmq may queue for this reader before dropping (a gap)
END_SEQ = b"\xff" * 8     # the replay's terminator: -1 as 8 signed bytes

log = logging.getLogger("switchyard.kv_events")


class ZmqSource:
    def __init__(self, backend: str, config: EventSourceConfig, sink: IndexSink,
                 capacity: int = DEFAULT_CAPACITY) -> None:
        self.backend = backend
        self.config = config
        self.status = SourceStatus("zmq", config.endpoint)
        self.stream = EventStream(backend, sink, self.status, capacity)
        self.interval = config.reconnect_interval_ms / 1000
        self._context: zmq.Context[Any] = zmq.Context.instance()
        self._dealer: zmq_trio.Socket | None = None
        self._lost_at: float | None = None    # when the connection was lost; None while connected
        self._connected_once = False

    async def run(self) -> None:
        self.stream.down("connecting")
        sub = self._socket(zmq.SUB)
        ms = self.config.reconnect_interval_ms
        sub.setsockopt(zmq.RCVHWM, RECEIVE_HWM)
        sub.setsockopt(zmq.RECONNECT_IVL, ms)
        sub.setsockopt(zmq.HEARTBEAT_IVL, max(ms, 1000))
        sub.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * max(ms, 1000))
        sub.setsockopt(zmq.SUBSCRIBE, self.config.topic.encode("utf-8"))
        monitor = sub.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        try:
            sub.connect(self.config.endpoint)
            self._new_dealer()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.stream.run)
                await self._read(sub, monitor)
        finally:
            self._drop_dealer()
            sub.disable_monitor()
            zmq_trio.close(monitor)
            zmq_trio.close(sub)

    def _socket(self, kind: int) -> zmq_trio.Socket:
        sock = cast(zmq_trio.Socket, self._context.socket(kind))
        sock.setsockopt(zmq.LINGER, 0)
        return sock

    # --- the live stream -------------------------------------------------------------------------

    async def _read(self, sub: zmq_trio.Socket, monitor: zmq_trio.Socket) -> None:
        while True:
            lost_at = self._lost_at if self._lost_at is not None and self.status.up else math.inf
            with trio.move_on_at(lost_at + self.interval) as timer:
                await zmq_trio.wait_any(monitor, sub)
            if timer.cancelled_caught:
                self.stream.down("disconnected")
                continue
            self._connection_events(monitor)
            for _ in range(BURST):
                try:
                    frames = sub.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                await self._message(frames)
            await trio.lowlevel.checkpoint()

    def _connection_events(self, monitor: zmq_trio.Socket) -> None:
        while True:
            try:
                event = recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            if event["event"] == zmq.EVENT_CONNECTED:
                self.status.connected = True
                self.stream.forget()
                if self._connected_once and self.status.up:
                    self.stream.reset("reconnected")
                else:
                    self.stream.up()
                    if self._connected_once:
                        log.info("KV events of %s: connected again to %s", self.backend, self.config.endpoint)
                self._connected_once = True
                self._lost_at = None
            elif event["event"] == zmq.EVENT_DISCONNECTED:
                self.status.connected = False
                if self._lost_at is None:
                    self._lost_at = trio.current_time()

    async def _message(self, frames: list[bytes]) -> None:
        if len(frames) != 3 or len(frames[1]) != 8:
            self.stream.malformed(None, f"a message of {len(frames)} frames, not [topic, seq (8 bytes), payload]")
            return
        seq = int.from_bytes(frames[1], "big")
        try:
            decoded = decode_msgpack(seq, frames[2])
        except MalformedBatch as exc:
            self.stream.malformed(seq, str(exc))
            return
        if self.stream.live(decoded) is Verdict.GAP and not await self._replay(decoded):
            self.stream.unrecoverable(decoded)

    # --- replay ------------------------------------------------------------------------------------

    async def _replay(self, trigger: Decoded) -> bool:
        """The gap before ``trigger`` closed from the publisher's ring; False when it cannot be."""
        dealer = self._dealer
        if dealer is None:
            return False
        rank = trigger.batch.data_parallel_rank
        start = self.stream.next_seq(rank)
        with trio.move_on_after(REPLAY_TIMEOUT):
            await zmq_trio.send_multipart(dealer, [b"", start.to_bytes(8, "big")])
            read = 0
            while True:
                frames = await zmq_trio.recv_multipart(dealer)
                if len(frames) == 3 and frames[0] == b"" and frames[1] == END_SEQ:
                    return self.stream.follows(trigger.batch)   # delivered unless the replay left a gap before it
                if len(frames) != 3 or frames[0] != b"" or len(frames[1]) != 8:
                    self.stream.malformed(None, f"a replay message of {len(frames)} frames")
                    continue
                seq = int.from_bytes(frames[1], "big")
                try:
                    decoded = decode_msgpack(seq, frames[2])
                except MalformedBatch as exc:
                    self.stream.malformed(seq, str(exc))
                    continue
                if decoded.batch.data_parallel_rank == rank and not self.stream.replayed(decoded):
                    log.info("KV events of %s: the replay starts after seq %d: the publisher's ring wrapped",
                             self.backend, start)
                    self._new_dealer()   # the rest of this replay is not wanted
                    return False
                read += 1
                if read % BURST == 0:
                    await trio.lowlevel.checkpoint()
        log.info("KV events of %s: no replay from %s within %gs", self.backend, self.config.replay_endpoint,
                 REPLAY_TIMEOUT)
        self._new_dealer()   # a late answer must not be read as the next replay's
        return False

    def _new_dealer(self) -> None:
        self._drop_dealer()
        if self.config.replay_endpoint:
            self._dealer = self._socket(zmq.DEALER)
            self._dealer.connect(self.config.replay_endpoint)

    def _drop_dealer(self) -> None:
        if self._dealer is not None:
            zmq_trio.close(self._dealer)
            self._dealer = None
