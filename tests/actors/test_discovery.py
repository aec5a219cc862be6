"""Model discovery: at start and on its interval; globs route discovered ids."""

import trio

from tests.harness import chat, gateway, request

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
