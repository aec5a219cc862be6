"""pyzmq sockets read and written on Trio, without threads.

A ZMQ socket's file descriptor signals edge-triggered, and only that its
state may have changed: readable does not mean a message is there, and a
send or receive can consume the edge. So every wait re-reads ``zmq.EVENTS``
(which also re-arms the edge) before sleeping on the descriptor, and every
send and receive is non-blocking. One task waits on a given socket at a
time (Trio refuses a second waiter on one descriptor).
"""

from __future__ import annotations

from typing import Any, Sequence, cast

import trio
import zmq

Socket = zmq.Socket[Any]


async def recv_multipart(sock: Socket) -> list[bytes]:
    while True:
        try:
            return sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            pass
        if _events(sock) & zmq.POLLIN:
            continue
        await trio.lowlevel.wait_readable(sock.fileno())


async def send_multipart(sock: Socket, frames: Sequence[bytes]) -> None:
    while True:
        try:
            sock.send_multipart(frames, zmq.NOBLOCK)
            return
        except zmq.Again:
            pass
        if _events(sock) & zmq.POLLOUT:
            continue
        await trio.lowlevel.wait_readable(sock.fileno())


def readable(sock: Socket) -> bool:
    return bool(_events(sock) & zmq.POLLIN)


async def wait_any(*socks: Socket) -> None:
    """Until one of ``socks`` may have a message (check each with ``readable``)."""
    if any(readable(s) for s in socks):
        return
    async with trio.open_nursery() as nursery:
        for sock in socks:
            nursery.start_soon(_wait_then_cancel, sock.fileno(), nursery.cancel_scope)


async def _wait_then_cancel(fd: int, scope: trio.CancelScope) -> None:
    await trio.lowlevel.wait_readable(fd)
    scope.cancel()


def _events(sock: Socket) -> int:
    return cast(int, sock.getsockopt(zmq.EVENTS))


def close(sock: Socket) -> None:
    """Close ``sock`` at once (nothing lingers), telling Trio its descriptor goes."""
    if sock.closed:
        return
    trio.lowlevel.notify_closing(sock.fileno())
    sock.close(linger=0)
