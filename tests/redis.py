"""A real Redis for the tests: Debian's ``redis-server`` in a temporary directory on a free loopback port.

Bind the fixtures in the test module that needs them (nothing here is
registered globally; an assignment, not an import, so the tests' parameters
of the same names are no redefinition to the linter)::

    from tests import redis

    redis_server, redis_url = redis.redis_server, redis.redis_url

``redis_server`` is one server for the whole session (started once however
many modules import it); ``redis_url`` is that server emptied (FLUSHALL)
before each test. ``RedisServer.stop()`` and ``.start()`` take the server away
and bring it back EMPTY within a test (no persistence: ``--save ''
--appendonly no``), as a Redis that restarted and lost its keys;
``.pause()`` and ``.resume()`` freeze it (a Redis that hangs rather than
refuses); the next test gets it running again.

Without the binary the tests fail (never skip): ``.ci/run`` installs the
``redis-server`` package.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.servers import Shared, free_port

BINARY = "/usr/bin/redis-server"
TIMEOUT = 30   # seconds a start or a stop may take


def redis_binary() -> str:
    """The server's path, or a failed test saying how to get one."""
    found = BINARY if os.access(BINARY, os.X_OK) else shutil.which("redis-server")
    if not found:
        pytest.fail(f"Redis's server binary ({BINARY}) is missing: these tests need a real server; .ci/run "
                    f"installs it (apt-get install redis-server), or install the Debian package `redis-server` "
                    f"by hand", pytrace=False)
    return found


def command(host: str, port: int, *args: str, timeout: float = 5.0) -> bytes:
    """Send one command (RESP) and return the reply's first line: enough for PING, FLUSHALL, DBSIZE."""
    parts = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    with socket.create_connection((host, port), timeout=timeout) as conn:
        conn.sendall(b"".join(parts))
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = conn.recv(4096)
            if not chunk:
                raise ConnectionError(f"redis on {host}:{port} closed the connection")
            reply += chunk
    if reply.startswith(b"-"):
        raise RuntimeError(f"redis {' '.join(args)} failed: {reply.decode(errors='replace').strip()}")
    return reply.split(b"\r\n", 1)[0]


class RedisServer:
    """One redis-server: 127.0.0.1 only, no persistence, no protected mode, its files in a tmp dir."""

    def __init__(self) -> None:
        self.binary = redis_binary()
        self.host = "127.0.0.1"
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="switchyard-redis-"))
        self.log = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> None:
        """Start the server (empty: nothing is saved) and wait until it answers PING."""
        if self.running:
            return
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", self.host, "--save", "", "--appendonly", "no",
             "--dir", str(self.root), "--logfile", str(self.log), "--daemonize", "no", "--protected-mode", "no"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.root)
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                if command(self.host, self.port, "PING", timeout=1.0) == b"+PONG":
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
                self.stop()
                raise RuntimeError(f"redis-server did not start on {self.host}:{self.port}:\n{log}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Kill the server at once (SIGKILL: as a crash; it saves nothing either way) and wait for it."""
        process, self.process = self.process, None
        self.paused = False
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)   # a stopped (SIGSTOP) process dies of it too
        process.wait(timeout=TIMEOUT)

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections stay open and nothing answers, as a hung or
        partitioned Redis; ``resume`` (or the next test) lets it go on."""
        if self.running:
            assert self.process is not None
            self.process.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.running and self.paused:
            assert self.process is not None
            self.process.send_signal(signal.SIGCONT)
        self.paused = False

    def flush(self) -> None:
        command(self.host, self.port, "FLUSHALL")

    def destroy(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


_shared = Shared(RedisServer, lambda server: server.start())


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The session's server, shared by every module that binds this fixture (``tests/servers.py``)."""
    yield from _shared.use()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """The session's server, running (again, if a test stopped or paused it) and empty."""
    redis_server.resume()
    redis_server.start()
    redis_server.flush()
    yield redis_server.url
    redis_server.resume()
    redis_server.start()
