"""Helpers shared by the end-to-end tests: config builders, a bounded thread hop, `switchyard serve` in a process."""

from __future__ import annotations

import functools
import os
import resource
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import attrs
import httpx
import trio
import yaml

from switchyard.protocol.serving.app import App
from switchyard.protocol.simulated.openai import SimulatedTransport
from tests.servers import free_port as free_port

REPO = Path(__file__).resolve().parents[2]


def backend(name: str, **simulation: Any) -> dict[str, Any]:
    """A simulated backend serving ``demo``: fast by default, overridable per key."""
    sim: dict[str, Any] = {"latency": "10ms", "tokens_per_second": 0, "chunks": 5}
    sim.update(simulation)
    return {"name": name, "type": "simulated", "models": ["demo"], "simulation": sim}


def gateway_config(*backends: dict[str, Any], **top: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "server": {"bind_address": "127.0.0.1:8080", "max_body_bytes": 4096},
        "selection_strategy": "RoundRobin",
        "backends": list(backends),
    }
    config.update(top)
    return config


@attrs.define
class Gateway:
    url: str  # http://127.0.0.1:PORT
    app: App
    config_path: Path

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def sim(self, name: str) -> SimulatedTransport:
        """The in-process transport behind simulated backend ``name``."""
        assert self.app.runtime is not None, "gateway runtime is not running"
        return self.app.runtime.upstream.simulated[f"{name}.simulated"]


async def in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a blocking client call (the openai SDK) in a worker thread, bounded."""
    with trio.fail_after(15):
        return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), abandon_on_cancel=True)


@asynccontextmanager
async def switchyard_serve(tmp_path: Path, config: dict | None, workers: int = 1, ready: bool = True,
                           max_open_files: int | None = None, host: str = "127.0.0.1", log_level: str = "warning"
                           ) -> AsyncIterator[tuple[trio.Process, str, Path]]:
    """``python -m protocol.cli serve`` on a free port of ``host``, ready (unless ``ready=False``: just
    started), with at most ``max_open_files`` descriptors if given (``ulimit -n``); always stopped (then
    killed) on exit. ``config`` None: the embedded demo. The URL is on 127.0.0.1 whatever ``host`` is (a
    wildcard address listens there too). Its stdout and stderr go to the log file."""
    args = []
    if config is not None:
        path = tmp_path / "cli.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        args = ["--config", str(path)]
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "switchyard.protocol.serving.cli", "serve", *args,
             "--bind", f"{host}:{port}", "--log-level", log_level, "--workers", str(workers)],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=None if max_open_files is None else functools.partial(limit_open_files, max_open_files))
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=2) as http:
            status = None if ready else 200
            with trio.move_on_after(10):
                while status != 200:
                    assert proc.poll() is None, log_path.read_text()
                    try:
                        status = (await http.get("/ready")).status_code
                    except httpx.TransportError:
                        await trio.sleep(0.1)
        assert status == 200, f"not ready within 10 s:\n{log_path.read_text()}"
        yield proc, url, log_path
    finally:
        await stop_process(proc, grace=5)


def limit_open_files(count: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


async def stop_process(proc: trio.Process, grace: float) -> None:
    """SIGTERM, ``grace`` seconds to exit, then SIGKILL; shielded, so a test that is being cancelled still
    leaves no process behind."""
    with trio.CancelScope(shield=True):
        if proc.returncode is None:
            proc.terminate()
            with trio.move_on_after(grace):
                await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
