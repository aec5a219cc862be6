"""A slow fake OpenAI upstream: every chat completion is a stream paced over seconds.

nginx (the fast upstream of the benchmark) sends a whole stream at once, so a
proxy in front of it holds each stream for a few milliseconds. To see what a
proxy costs while many streams are *open* -- the memory of 1,000 clients
waiting on tokens -- the upstream has to hold them. This one answers
`POST .../chat/completions` with the benchmark's 20 chat.completion.chunk
events and `data: [DONE]`, one event every `--interval` seconds, over
HTTP/1.1 chunked encoding with keep-alive; `GET .../health` and
`GET .../v1/models` answer at once. Raw trio sockets, no framework, so one
process holds thousands of streams on a fraction of a core.

    python tests/perf/paced_upstream.py --bind 127.0.0.1:8083 --interval 0.5
"""
from __future__ import annotations

import argparse
import json
from functools import partial

import trio
from targets import MODELS_PATHS, models_body, sse_events

MAX_HEAD = 64 * 1024


def _response(status: str, content_type: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n\r\n"
            .encode() + body)


async def _read_request(stream: trio.SocketStream, buf: bytearray) -> tuple[bytes, bytes] | None:
    """Read one request (head and a content-length body) from `buf` + the socket; None at EOF."""
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEAD:
            return None
        data = await stream.receive_some(65536)
        if not data:
            return None
        buf += data
    head, _, _ = bytes(buf).partition(b"\r\n\r\n")
    del buf[:len(head) + 4]
    lines = head.split(b"\r\n")
    method, path = lines[0].split(b" ")[:2]
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(buf) < length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buf += data
    del buf[:length]
    return method, path.split(b"?")[0]


async def handle(stream: trio.SocketStream, events: list[bytes], interval: float) -> None:
    buf = bytearray()
    try:
        while True:
            request = await _read_request(stream, buf)
            if request is None:
                return
            method, path = request
            if method == b"POST" and path.endswith(b"/chat/completions"):
                await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                      b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
                for i, event in enumerate(events):
                    if i:
                        await trio.sleep(interval)
                    await stream.send_all(b"%x\r\n%s\r\n" % (len(event), event))
                await stream.send_all(b"0\r\n\r\n")
            elif path.endswith(b"/health"):
                await stream.send_all(_response("200 OK", "text/plain", b"ok"))
            elif path in MODELS_PATHS:
                await stream.send_all(_response("200 OK", "application/json", models_body("bench-slow").encode()))
            else:
                body = json.dumps({"error": {"message": "not found", "type": "invalid_request_error"}}).encode()
                await stream.send_all(_response("404 Not Found", "application/json", body))
    except (trio.BrokenResourceError, trio.ClosedResourceError, ValueError):
        return  # client went away or sent something we do not speak
    finally:
        await trio.aclose_forcefully(stream)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="127.0.0.1:8083")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between events")
    args = parser.parse_args()
    host, _, port = args.bind.rpartition(":")
    events = [e.encode() for e in sse_events("bench-slow")]
    trio.run(partial(trio.serve_tcp, partial(handle, events=events, interval=args.interval), int(port),
                     host=host, backlog=4096))


if __name__ == "__main__":
    main()
