"""GET /admin/config and GET /admin/backends: what is running, with no secret in any answer (MockClock)."""

import trio

from tests.harness import chat, gateway, request

SECRETS = {
    "ADMIN_TOKEN": "admin-token-from-env-0123456789",
    "KEY_A": "sk-live-backend-a-SECRET-0001",
    "KEY_B": "sk-live-backend-b-SECRET-0002",
    "URL_PASS": "url-password-SECRET-0003",
}
AUTH = [(b"authorization", f"Bearer {SECRETS['ADMIN_TOKEN']}".encode())]

CONFIG = """
admin:
  token: ${ADMIN_TOKEN}
health_checks: {interval: 1h}
fallback: {fallback_chains: {demo: [other, another]}}
backends:
  - name: a
    type: simulated
    api_key: ${KEY_A}
    models: [demo]
    weight: 3
    simulation: {latency: 1s, chunks: 2}
  - name: b
    type: generic
    url: "https://ops:${URL_PASS}@b.example/v1"
    models: [demo, "llama-*"]
    enabled: false
  - name: c
    type: simulated
    api_key: ${KEY_B}
    models: [demo]
    internal: true
"""


def with_env(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


def assert_no_secret(body: bytes) -> None:
    for name, value in SECRETS.items():
        assert value.encode() not in body, name


async def test_admin_config_is_the_running_snapshot_with_secrets_masked(autojump_clock, monkeypatch):
    with_env(monkeypatch)
    async with gateway(CONFIG) as app:
        reply = await request(app, "GET", "/admin/config", headers=AUTH)
        assert reply.status == 200
        config = reply.json()
        snapshot = app.runtime.snapshot
        assert (config["revision"], config["source"]) == (snapshot.revision, snapshot.source) and config["revision"]
        assert config["admin"]["token"] == "***"
        a, b, c = config["backends"]
        assert (a["api_key"], b["api_key"], c["api_key"]) == ("***", None, "***")
        assert b["url"] == "https://ops:***@b.example/v1"
        assert (a["type"], a["weight"], b["enabled"], c["internal"]) == ("simulated", 3, False, True)
        assert b["models"] == ["demo", "llama-*"]                            # tuples keep their order
        assert config["fallback"]["fallback_chains"] == {"demo": ["other", "another"]}
        assert config["selection_strategy"] == "RoundRobin"                  # enums as values
        assert config["retry"]["retryable_status_codes"] == [429, 500, 502, 503, 504, 529]  # frozensets sorted
        assert_no_secret(reply.body)


async def test_admin_backends_shows_health_circuits_and_load(autojump_clock, monkeypatch):
    with_env(monkeypatch)
    async with gateway(CONFIG) as app:
        t0 = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request, app, "POST", "/v1/chat/completions", chat())
            await trio.sleep_until(t0 + 0.5)
            busy = (await request(app, "GET", "/admin/backends", headers=AUTH)).json()
        assert [x["in_flight"] for x in busy["backends"]] == [1, 0, 0]
        for i in range(4):   # failures of four clients: three without the first one's open the circuit
            app.runtime.health.call_failed("a", "demo", "HTTP 500", f"ip 10.0.0.{i}")
        reply = await request(app, "GET", "/admin/backends", headers=AUTH)
        body = reply.json()
        a, b, c = body["backends"]
        assert (a["name"], a["type"], a["url"], a["models"], a["enabled"], a["internal"], a["weight"]) == \
            ("a", "simulated", "http://a.simulated", ["demo"], True, False, 3)
        assert a["health"] == {"state": "healthy", "since": t0, "failures": 0, "successes": 1,
                               "last_error": None, "last_check": t0}
        assert a["circuits"] == {"demo": {"state": "open", "failures": 4, "cooldown": 2.0,
                                          "opened_at": body["now"]}}
        assert a["in_flight"] == 0 and a["latency_avg"] > 0
        assert a["discovered_models"] == ["demo"]
        assert b["health"] is None and b["circuits"] == {} and b["latency_avg"] is None  # disabled: never checked
        assert b["url"] == "https://ops:***@b.example/v1"
        assert c["internal"] is True and c["health"]["state"] == "healthy"
        assert_no_secret(reply.body)


async def test_no_admin_response_contains_a_secret(autojump_clock, monkeypatch):
    with_env(monkeypatch)
    async with gateway(CONFIG) as app:
        call = await request(app, "POST", "/v1/chat/completions", chat())
        rid = call.headers[b"x-continuum-request-id"].decode()
        wrong = [(b"authorization", b"Bearer not-the-admin-token-xxxxx")]
        replies = [await request(app, m, p, headers=h) for m, p, h in [
            ("GET", "/admin/config", AUTH), ("GET", "/admin/backends", AUTH),
            ("GET", f"/admin/requests/{rid}/events", AUTH), ("GET", "/admin/requests/req_0/events", AUTH),
            ("POST", "/admin/config", AUTH), ("GET", "/admin/nothing", AUTH),
            ("GET", "/admin/config", wrong), ("GET", "/admin/backends", [])]]
        assert [r.status for r in replies] == [200, 200, 200, 404, 405, 404, 401, 401]
        for reply in replies:
            assert_no_secret(reply.body)
            assert_no_secret(b"".join(v for _, v in reply.headers.items()))


async def test_admin_views_are_off_without_a_token(autojump_clock):
    async with gateway(CONFIG.replace("admin:\n  token: ${ADMIN_TOKEN}\n", "")
                       .replace("${KEY_A}", "k").replace("${KEY_B}", "k").replace("${URL_PASS}", "p")) as app:
        for path in ("/admin/config", "/admin/backends"):
            assert (await request(app, "GET", path, headers=AUTH)).status == 404
