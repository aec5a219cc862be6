"""A webhook receiver for the alerts' tests: a plain HTTP/1.1 server on 127.0.0.1, in trio, noting each POST.

It serves on a free port of its own, or on a socket already listening
(``listening``): a fleet whose config names the webhook's URL starts before
the test that serves it runs, and a port only reserved (bound, then closed)
could be taken by another socket in between.
"""

from __future__ import annotations

import functools
import json
import socket
from typing import Any

import trio


def listening() -> socket.socket:
    """A socket listening on a free port of 127.0.0.1: its port can go into a config at once, and held by it
    no other socket takes it; a connection made before anything serves it waits in its backlog."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


class Receiver:
    """A webhook: a plain HTTP/1.1 server that answers each POST with the next status of ``statuses``
    (then 200), one request per connection."""

    def __init__(self, statuses: tuple[int, ...] = ()) -> None:
        self.statuses = list(statuses)
        self.got: list[tuple[float, str, dict[str, str], Any]] = []   # (trio time, path, headers, body)

    async def handle(self, stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:   # closed before a whole head: nothing was sent
                return
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:])}
        while len(body) < int(headers.get("content-length", 0)):
            body += await stream.receive_some(65536)
        self.got.append((trio.current_time(), lines[0].split()[1], headers, json.loads(body)))
        status = self.statuses.pop(0) if self.statuses else 200
        await stream.send_all(f"HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".encode())
        await stream.aclose()

    async def start(self, nursery: trio.Nursery, sock: socket.socket | None = None) -> str:
        """Serve until ``nursery`` is cancelled, on a free port or on ``sock`` (a ``listening`` socket, left
        open: a copy of it is served and closed); the base URL."""
        if sock is None:
            listeners = await nursery.start(functools.partial(trio.serve_tcp, self.handle, 0, host="127.0.0.1"))
        else:
            listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(sock.dup()))]
            await nursery.start(trio.serve_listeners, self.handle, listeners)
        return f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
