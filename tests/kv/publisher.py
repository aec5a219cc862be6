"""A publisher speaking vLLM's KV-event wire exactly (vllm/distributed/kv_events.py ``ZmqEventPublisher``), for the
readers' tests: 3-frame messages ``[topic, seq (8 bytes BE), msgpack batch]`` on a PUB-side socket, and a ROUTER
serving replay from a ring of the last ``buffer_steps`` batches: ``[id, b"", start]`` in, ``[id, b"", seq,
payload]`` per buffered batch from ``start`` out, then ``[id, b"", ff*8, b""]``.

The PUB side is an XPUB: the same wire for a subscriber, and it tells the test when the reader's subscription
arrived (a PUB drops what it sends before that). Payloads are built with msgspec in either of vLLM's forms:
events as arrays with every field (vLLM before PR #42892) or as maps without the fields left at None (after);
the batch as an array or a map.
"""

from __future__ import annotations

import collections
from typing import Any

import msgspec
import trio
import zmq

from switchyard.protocol.kv import zmq_trio
from tests.servers import free_port

END_SEQ = (-1).to_bytes(8, "big", signed=True)


def stored(hashes: list[int], parent: int | None, tokens: list[int], block_size: int = 2,
           medium: str | None = "GPU") -> dict[str, Any]:
    return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent, "token_ids": tokens,
            "block_size": block_size, "lora_id": None, "medium": medium, "lora_name": None}


def removed(hashes: list[int], medium: str | None = "GPU") -> dict[str, Any]:
    return {"type": "BlockRemoved", "block_hashes": hashes, "medium": medium}


def cleared() -> dict[str, Any]:
    return {"type": "AllBlocksCleared"}


_ORDER = {"BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
                          "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"),
          "BlockRemoved": ("block_hashes", "medium", "group_idx"), "AllBlocksCleared": ()}
_DEFAULTED = {"extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"}


def payload(events: list[dict[str, Any]], *, ts: float = 1.5, rank: int | None = 0, maps: bool = False,
            batch_map: bool = False) -> bytes:
    """A batch as vLLM's msgspec encoder writes it (see the module's docstring)."""
    def one(event: dict[str, Any]) -> Any:
        kind = event["type"]
        if maps:   # omit_defaults: the defaulted fields left at None are not written
            return {"type": kind, **{k: event.get(k) for k in _ORDER[kind]
                                     if k not in _DEFAULTED or event.get(k) is not None}}
        return [kind, *(event.get(k) for k in _ORDER[kind])]
    encoded = [one(e) for e in events]
    if batch_map:
        return msgspec.msgpack.encode({"ts": ts, "events": encoded, "data_parallel_rank": rank})
    return msgspec.msgpack.encode([float(ts), encoded, rank])


class VllmPublisher:
    def __init__(self, *, replay: bool = True, buffer_steps: int = 100, topic: bytes = b"", maps: bool = False,
                 port: int | None = None, replay_port: int | None = None) -> None:
        self.port = port or free_port()
        self.replay_port = (replay_port or free_port()) if replay else None
        self.topic, self.maps = topic, maps
        self.ring: collections.deque[tuple[int, bytes]] = collections.deque(maxlen=buffer_steps)
        self.seq = 0
        self.replays: list[int] = []   # the start of every replay asked for
        context = zmq.Context.instance()
        self.pub = context.socket(zmq.XPUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub.setsockopt(zmq.SNDHWM, 100_000)
        self.pub.bind(f"tcp://127.0.0.1:{self.port}")
        self.router: zmq.Socket | None = None
        if self.replay_port is not None:
            self.router = context.socket(zmq.ROUTER)
            self.router.setsockopt(zmq.LINGER, 0)
            self.router.bind(f"tcp://127.0.0.1:{self.replay_port}")

    @property
    def endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    @property
    def replay_endpoint(self) -> str | None:
        return f"tcp://127.0.0.1:{self.replay_port}" if self.replay_port is not None else None

    async def subscribed(self) -> None:
        """Until a subscriber's subscription arrived (``b"\\x01" + topic``)."""
        while True:
            frames = await zmq_trio.recv_multipart(self.pub)
            if frames[0][:1] == b"\x01":
                return

    def publish(self, events: list[dict[str, Any]], *, send: bool = True, raw: bytes | None = None,
                rank: int | None = 0) -> int:
        """The next batch, kept in the ring; sent unless ``send`` is False (a batch lost on the way)."""
        seq, self.seq = self.seq, self.seq + 1
        data = raw if raw is not None else payload(events, rank=rank, maps=self.maps, batch_map=self.maps)
        self.ring.append((seq, data))
        if send:
            self.pub.send_multipart([self.topic, seq.to_bytes(8, "big"), data], zmq.NOBLOCK)
        return seq

    def restart_numbering(self) -> None:
        """What a restarted engine does: numbers from 0 again (its ring is new too)."""
        self.seq = 0
        self.ring.clear()

    async def serve_replay(self) -> None:
        assert self.router is not None
        while True:
            try:
                frames = await zmq_trio.recv_multipart(self.router)
            except trio.ClosedResourceError:
                return   # closed: a stopped engine
            if len(frames) != 3:
                continue   # vLLM logs and ignores it
            identity, start = frames[0], int.from_bytes(frames[2], "big")
            self.replays.append(start)
            for seq, data in list(self.ring):
                if seq >= start:
                    await zmq_trio.send_multipart(self.router, [identity, b"", seq.to_bytes(8, "big"), data])
            await zmq_trio.send_multipart(self.router, [identity, b"", END_SEQ, b""])

    def close(self) -> None:
        for sock in (self.pub, self.router):
            if sock is not None:
                zmq_trio.close(sock)


async def settle() -> None:
    """Long enough for libzmq to carry a few messages over loopback."""
    await trio.sleep(0.05)
