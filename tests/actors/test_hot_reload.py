"""Hot reload: a valid revision is published whole, an invalid one changes nothing."""

import contextlib
import json

import pytest
import trio

from switchyard.config.load import load_file
from switchyard.protocol.serving.app import App
from switchyard.protocol.serving.wiring import new_runtime
from tests.harness import chat, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
server: {bind_address: "127.0.0.1:8080"}
health_checks: {interval: 1h}
selection_strategy: STRATEGY
backends:
  - {name: a, type: simulated, models: [demo],
     simulation: {latency: 100ms, tokens_per_second: 2, chunks: 6, text: "old answer from a"}}
EXTRA"""


def write(path, strategy="RoundRobin", extra="", text="old answer from a"):
    path.write_text(CONFIG.replace("STRATEGY", strategy).replace("EXTRA", extra).replace("old answer from a", text))


@contextlib.asynccontextmanager
async def running(path, watch=False):
    snapshot = load_file(path).snapshot
    async with trio.open_nursery() as nursery:
        runtime = await nursery.start(new_runtime(snapshot, config_path=str(path), watch=watch).run)
        yield App(lambda: snapshot, runtime=runtime)
        nursery.cancel_scope.cancel()


NEW_BACKEND = "  - {name: b, type: simulated, models: [other], simulation: {latency: 10ms}}\n"


async def test_valid_revision_applies_live_and_checks_new_backends_at_once(autojump_clock, tmp_path):
    path = tmp_path / "c.yaml"
    write(path)
    async with running(path) as app:
        rt = app.runtime
        assert (await request(app, "POST", "/v1/chat/completions", chat("other"))).status == 404
        write(path, extra=NEW_BACKEND)
        result = rt.reload_from_file("admin")
        assert result["result"] == "applied" and result["pending_restart"] == []
        t = trio.current_time()
        await trio.sleep(0.01)
        events = rt.upstream.simulated["b.simulated"].events
        assert [(round(at - t, 3), k) for at, k in events] in ([(0, "health:200"), (0, "models")],
                                                              [(0, "models"), (0, "health:200")])  # at once
        reply = await request(app, "POST", "/v1/chat/completions", chat("other"))
        assert reply.status == 200
        assert rt.reload_status.revision == rt.snapshot.revision != ""


async def test_invalid_revision_keeps_the_running_one_and_names_every_error(autojump_clock, tmp_path):
    path = tmp_path / "c.yaml"
    write(path)
    async with running(path) as app:
        rt = app.runtime
        before = rt.snapshot
        path.write_text(path.read_text().replace("health_checks: {interval: 1h}",
                                                 "health_checks: {interval: soon, bogus: 1}"))
        result = rt.reload_from_file("watcher")
        assert result["result"] == "rejected"
        assert result["errors"] == ["health_checks.interval: must be a duration like 10s, 500ms or 1m30s, got 'soon'",
                                    "health_checks.bogus: unknown key"]
        assert rt.snapshot is before
        assert rt.reload_status.last_error["errors"] == result["errors"]
        assert (await request(app, "POST", "/v1/chat/completions", chat("demo"))).status == 200


async def test_a_stream_in_flight_finishes_on_its_snapshot_new_calls_use_the_new_one(autojump_clock, tmp_path):
    path = tmp_path / "c.yaml"
    write(path)
    async with running(path) as app:
        rt = app.runtime
        replies = {}

        async def long_stream():
            replies["old"] = await request(app, "POST", "/v1/chat/completions", chat("demo", stream=True))
        async with trio.open_nursery() as n:
            n.start_soon(long_stream)
            await trio.sleep(0.5)  # mid-stream
            write(path, text="new answer from a")
            assert rt.reload_from_file("signal")["result"] == "applied"
            replies["new"] = await request(app, "POST", "/v1/chat/completions", chat("demo"))
        old_text = "".join(json.loads(e)["choices"][0]["delta"].get("content") or ""
                           for e in replies["old"].events() if e != b"[DONE]")
        assert old_text == "old answer from a"  # the simulator kept streaming what it started with
        assert replies["new"].json()["choices"][0]["message"]["content"] == "new answer from a"
        trace = rt.traces.get(replies["old"].headers[b"x-continuum-request-id"].decode())
        assert trace.revision != rt.snapshot.revision  # the stream ran on the revision it began with


async def test_restart_only_fields_are_pending_not_half_applied(autojump_clock, tmp_path):
    path = tmp_path / "c.yaml"
    write(path)
    async with running(path) as app:
        rt = app.runtime
        path.write_text(path.read_text().replace("127.0.0.1:8080", "127.0.0.1:9090")
                        + "timeouts: {connection: 3s}\n")
        result = rt.reload_from_file("admin")
        assert result["pending_restart"] == ["server.bind_address", "timeouts.connection"]
        assert rt.snapshot.server.bind_address == "127.0.0.1:8080"
        assert rt.snapshot.timeouts.connection == 10.0
        assert rt.reload_status.pending_restart == ("server.bind_address", "timeouts.connection")


async def test_strategy_swap_keeps_latency_statistics(autojump_clock, tmp_path):
    path = tmp_path / "c.yaml"
    write(path)
    async with running(path) as app:
        rt = app.runtime
        await request(app, "POST", "/v1/chat/completions", chat("demo"))
        stats = dict(rt.pool.latency)
        write(path, strategy="LeastLatency")
        rt.reload_from_file("admin")
        assert type(rt.pool.picker).__name__ == "LeastLatency"
        assert rt.pool.latency == stats and stats


async def test_removed_backend_is_forgotten(autojump_clock, tmp_path):
    path = tmp_path / "c.yaml"
    write(path, extra=NEW_BACKEND)
    async with running(path) as app:
        rt = app.runtime
        write(path)
        rt.reload_from_file("admin")
        assert "b" not in rt.health.view.backends
        assert (await request(app, "POST", "/v1/chat/completions", chat("other"))).status == 404


async def test_watcher_reloads_a_changed_file(autojump_clock, tmp_path):
    path = tmp_path / "c.yaml"
    write(path)
    async with running(path, watch=True) as app:
        rt = app.runtime
        assert rt.reload_status.watcher == "watching"
        write(path, extra=NEW_BACKEND)
        await trio.sleep(1.5)
        assert rt.reload_status.last_reload["trigger"] == "watcher"
        assert "b" in rt.health.view.backends


async def test_unchanged_file_is_not_reapplied(autojump_clock, tmp_path):
    path = tmp_path / "c.yaml"
    write(path)
    async with running(path) as app:
        assert app.runtime.reload_from_file("admin")["result"] == "unchanged"


TOKEN = "reload-admin-token-0123456789"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]


async def test_admin_reload_and_status(autojump_clock, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.replace("STRATEGY", "RoundRobin").replace("EXTRA", "") + f"admin: {{token: {TOKEN}}}\n")
    async with running(path) as app:
        status = (await request(app, "GET", "/admin/config/hot-reload-status", headers=AUTH)).json()
        assert status["path"] == str(path) and status["watcher"] == "disabled"
        path.write_text(path.read_text().replace("interval: 1h", "interval: nope"))
        reply = await request(app, "POST", "/admin/config/reload", headers=AUTH)
        assert reply.status == 422 and reply.json()["result"] == "rejected"
        status = (await request(app, "GET", "/admin/config/hot-reload-status", headers=AUTH)).json()
        assert status["last_error"]["errors"] == [
            "health_checks.interval: must be a duration like 10s, 500ms or 1m30s, got 'nope'"]
        path.write_text(path.read_text().replace("interval: nope", "interval: 2h"))
        reply = await request(app, "POST", "/admin/config/reload", headers=AUTH)
        assert reply.status == 200 and reply.json()["result"] == "applied"
        assert reply.json()["status"]["last_error"] is None
        assert (await request(app, "POST", "/admin/config/reload")).status == 401


async def test_admin_token_never_echoed_in_config_errors(tmp_path):
    import pytest

    from switchyard.config.load import ConfigError, load_text

    with pytest.raises(ConfigError) as info:
        load_text("admin: {token: short-secret}\nbackends: [{name: a, type: simulated}]\n", env={})
    assert "short-secret" not in str(info.value)


async def test_a_reload_that_brings_limits_to_several_workers_without_redis_is_rejected(
        autojump_clock, tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHYARD_WORKERS", "2")   # as workers.py tells each worker of `--workers 2`
    path = tmp_path / "c.yaml"
    write(path)
    async with running(path) as app:
        rt = app.runtime
        path.write_text(path.read_text() + "rate_limiting: {global: {requests_per_minute: 100}}\n")
        result = rt.reload_from_file("admin")
        assert result["result"] == "rejected"
        assert "state.redis_url" in result["errors"][0] and "2 workers" in result["errors"][0]
        assert not rt.snapshot.limits_enabled   # still the running revision


@pytest.mark.parametrize("discovery", ["true", "false"])
async def test_a_reload_whose_fallback_chain_names_a_model_no_backend_serves_warns_with_its_path(
        autojump_clock, tmp_path, caplog, discovery):
    """Accepted (the chain may name a model that comes later), but said at once, in the reload's answer and
    status too: by the loader when every model is known from the file, else against what discovery knows."""
    path = tmp_path / "c.yaml"
    backend = f"  - {{name: a, type: simulated, models: [demo], discovery: {discovery}}}\n"
    path.write_text("health_checks: {interval: 1h}\nbackends:\n" + backend)
    async with running(path) as app:
        rt = app.runtime
        await trio.sleep(0.1)   # discovery's first round
        path.write_text(path.read_text() + "fallback: {enabled: true, fallback_chains: {demo: [ghost]}}\n")
        result = rt.reload_from_file("admin")
    assert result["result"] == "applied"
    [warning] = result["warnings"]
    assert warning.startswith("fallback.fallback_chains.demo[0]: ") and "'ghost'" in warning
    assert rt.reload_status.last_reload["warnings"] == result["warnings"]
    assert sum("fallback.fallback_chains.demo[0]" in r.getMessage() for r in caplog.records) == 1
