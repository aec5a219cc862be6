"""Helpers shared by the end-to-end tests: config builders and a bounded thread hop."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

import attrs
import trio

from protocol.app import App
from protocol.simulated import SimulatedTransport


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
