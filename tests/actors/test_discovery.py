"""Model discovery: at start and on its interval; globs route discovered ids."""

import logging

import pytest
import trio

from switchyard.config.load import load_text
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
discovery: {interval: 60s}
health_checks: {interval: 1h, path: /health}
backends:
  - {name: a, type: simulated, models: [llama-3-8b, phi-3]}
  - {name: globbed, type: generic, url: "http://a.simulated", models: ["llama-*"]}
"""


async def test_discovery_runs_at_start_and_on_interval(autojump_clock):
    t0 = trio.current_time()
    async with gateway(CONFIG) as app:
        sim = app.runtime.upstream.simulated["a.simulated"]
        assert app.runtime.discovery.view["globbed"] == frozenset({"llama-3-8b", "phi-3"})
        await trio.sleep(130)
        # both backends point at the same simulated host: two fetches per round
        assert [t - t0 for t, k in sim.events if k == "models"] == [0, 0, 60, 60, 120, 120]


async def test_glob_routes_discovered_model_only(autojump_clock):
    async with gateway(CONFIG) as app:
        models = {m["id"]: m["backends"] for m in (await request(app, "GET", "/v1/models")).json()["data"]}
        assert models == {"llama-3-8b": ["a", "globbed"], "phi-3": ["a"]}
        assert (await request(app, "POST", "/v1/chat/completions", chat("llama-3-8b"))).status == 200
        assert (await request(app, "POST", "/v1/chat/completions", chat("llama-9"))).status == 404


async def test_failed_discovery_keeps_previous_ids(autojump_clock):
    async with gateway(CONFIG) as app:
        sim = app.runtime.upstream.simulated["a.simulated"]
        before = app.runtime.discovery.view["globbed"]

        async def broken(request):
            raise __import__("httpx").ConnectError("refused")
        sim.handle_async_request = broken
        await trio.sleep(61)
        assert app.runtime.discovery.view["globbed"] == before


CHAINS = CONFIG + "fallback: {enabled: true, fallback_chains: {llama-3-8b: [phi-3, llama-9]}}\n"


async def test_chain_entry_no_backend_serves_warns_once_per_revision_after_discovery(autojump_clock, caplog):
    def warned():
        return [r.getMessage() for r in caplog.records
                if r.name == "switchyard.discovery" and "fallback.fallback_chains" in r.getMessage()]

    caplog.set_level(logging.WARNING, logger="switchyard.discovery")
    async with gateway(CHAINS) as app:
        assert warned() == [("config: fallback.fallback_chains.llama-3-8b[1]: after discovery no backend serves "
                             "model 'llama-9': this step of the chain never finds a backend")]
        await trio.sleep(130)   # two more rounds: nothing new
        assert len(warned()) == 1
        app.runtime.apply(load_text(CHAINS.replace("[phi-3, llama-9]", "[llama-9, phi-4]")).snapshot)
        await trio.sleep(1)     # the reload's round
        assert [m.split(":")[1].strip() for m in warned()[1:]] == [
            "fallback.fallback_chains.llama-3-8b[0]", "fallback.fallback_chains.llama-3-8b[1]"]
        await trio.sleep(61)
        assert len(warned()) == 3
