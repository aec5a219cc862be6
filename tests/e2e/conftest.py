"""End-to-end fixtures: a real Switchyard on a real socket, driven by real clients.

``start_gateway(config)`` writes the config as YAML under ``tmp_path``, builds
the app from that file exactly as ``switchyard serve --config`` does, and runs
hypercorn's trio server in-process on ``127.0.0.1`` with an ephemeral port,
with the connection handling ``serve`` installs (``client_eof``).
Every gateway a test started is shut down when the test ends: gracefully, and
cancelled if that takes longer than ``SHUTDOWN_BOUND``.

The official ``openai`` SDK is synchronous (or asyncio-based), so tests call
it in a worker thread (``support.in_thread``); the SDK is the client under
test, the gateway itself never leaves Trio.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest
import trio
import yaml
from hypercorn.trio import serve

from switchyard.config.load import load_file
from switchyard.protocol.serving import client_eof
from switchyard.protocol.serving.app import create_app
from switchyard.protocol.serving.workers import hypercorn_config
from tests.e2e.support import REPO, Gateway

SHUTDOWN_BOUND = 5.0
TOOL_SERVER = str(REPO / "tests" / "mcp" / "tool_server.py")   # a real MCP server: `stdio` or `http`

StartGateway = Callable[[dict[str, Any]], Awaitable[Gateway]]


@pytest.fixture
async def start_gateway(tmp_path: Path) -> AsyncIterator[StartGateway]:
    client_eof.install()   # hypercorn's connections as `serve` runs them
    stops: list[trio.Event] = []
    async with trio.open_nursery() as nursery:

        async def start(config: dict[str, Any]) -> Gateway:
            path = tmp_path / f"switchyard-{len(stops)}.yaml"
            path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
            app = create_app(str(path))
            hc = hypercorn_config(load_file(str(path)).snapshot.server, "127.0.0.1:0")   # as `serve` does
            hc.graceful_timeout = 1.0
            stop = trio.Event()
            stops.append(stop)
            with trio.fail_after(5):
                binds = await nursery.start(functools.partial(serve, app, hc, shutdown_trigger=stop.wait))
            url = binds[0]
            assert url.startswith("http://127.0.0.1:"), binds
            return Gateway(url=url, app=app, config_path=path)

        try:
            yield start
        finally:
            for stop in stops:
                stop.set()
            nursery.cancel_scope.deadline = trio.current_time() + SHUTDOWN_BOUND


@pytest.fixture(scope="module")
def tool_server() -> Iterator[str]:
    """``tests/mcp/tool_server.py`` over Streamable HTTP on a free port of 127.0.0.1, for the module: its URL."""
    proc = subprocess.Popen([sys.executable, TOOL_SERVER, "http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.kill()
        proc.wait()
