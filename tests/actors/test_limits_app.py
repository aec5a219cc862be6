"""The built-in model-list limits, the model-list cache and the concurrency cap, through the app (MockClock)."""

import logging

import pytest
import trio

from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

ONE = """
health_checks: {interval: 1h}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2}}
"""

# `a` is internal, so only what `globbed` discovers (and its glob admits) is listed.
DISCOVERED = """
discovery: {interval: 1h}
health_checks: {interval: 1h, path: /health}
backends:
  - {name: a, type: simulated, models: [phi-3], internal: true}
  - {name: globbed, type: generic, url: "http://a.simulated", models: ["llama-*"]}
"""

KEY_A = [(b"authorization", b"Bearer sk-client-aaaaaaaa-0001")]
KEY_A2 = [(b"authorization", b"Bearer sk-client-aaaaaaaa-0002")]   # same first 16 characters
KEY_B = [(b"authorization", b"Bearer sk-client-bbbbbbbb-0001")]


def from_peer(app, host: str, port: int = 50000):
    """The app as seen from a socket peer at ``host`` (the harness sends no ``client``)."""
    async def asgi(scope, receive, send):
        await app({**scope, "client": (host, port)}, receive, send)
    asgi.runtime = app.runtime
    return asgi


def ids(reply) -> list[str]:
    return [m["id"] for m in reply.json()["data"]]


# --- GET /v1/models limiter ------------------------------------------------------------------


async def test_models_limit_burst_of_10_then_429_with_retry_after(autojump_clock):
    async with gateway(ONE) as app:
        t0 = trio.current_time()
        statuses = [(await request(app, "GET", "/v1/models", headers=KEY_A)).status for _ in range(11)]
        assert statuses == [200] * 10 + [429]
        refused = await request(app, "GET", "/v1/models", headers=KEY_A)
        error = refused.json()["error"]
        assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limit_exceeded")
        assert "burst limit of 10 per 5s" in error["message"]
        assert refused.headers[b"retry-after"] == b"1"       # one token back after 0.5 s
        assert refused.headers[b"x-continuum-request-id"].startswith(b"req_")
        await trio.sleep_until(t0 + 0.5)
        assert (await request(app, "GET", "/v1/models", headers=KEY_A)).status == 200


async def test_models_limit_sustained_60_per_minute(autojump_clock):
    async with gateway(ONE) as app:
        t0 = trio.current_time()
        ok = 0
        for i in range(200):  # two a second keeps the burst bucket level; the minute bucket drains
            await trio.sleep_until(t0 + i * 0.5)
            reply = await request(app, "GET", "/v1/models", headers=KEY_A)
            if reply.status == 429:
                break
            ok += 1
        assert "sustained limit of 60 per minute" in reply.json()["error"]["message"]
        assert ok == 119   # 60 + 1 a second for ~59 s: the long-run rate is 60 a minute
        assert reply.headers[b"retry-after"] == b"1"


async def test_models_limit_keys_on_the_first_16_characters_of_the_bearer(autojump_clock):
    async with gateway(ONE) as app:
        for _ in range(10):
            await request(app, "GET", "/v1/models", headers=KEY_A)
        assert (await request(app, "GET", "/v1/models", headers=KEY_A2)).status == 429  # same prefix
        assert (await request(app, "GET", "/v1/models", headers=KEY_B)).status == 200
        assert (await request(app, "GET", "/v1/models")).status == 200                  # no key: by IP


async def test_models_limit_falls_back_to_the_client_ip(autojump_clock):
    async with gateway(ONE) as app:
        one, two = from_peer(app, "203.0.113.1"), from_peer(app, "203.0.113.2")
        assert [(await request(one, "GET", "/v1/models")).status for _ in range(11)] == [200] * 10 + [429]
        assert (await request(two, "GET", "/v1/models")).status == 200
        # X-Forwarded-For from an untrusted peer is not believed: still 203.0.113.1
        spoofed = [(b"x-forwarded-for", b"198.51.100.9")]
        assert (await request(one, "GET", "/v1/models", headers=spoofed)).status == 429


async def test_models_limit_uses_x_forwarded_for_behind_a_trusted_proxy(autojump_clock):
    async with gateway("server: {trusted_proxies: [10.0.0.0/8]}\n" + ONE) as app:
        proxy = from_peer(app, "10.0.0.7")
        alice = [(b"x-forwarded-for", b"198.51.100.1")]
        bob = [(b"x-forwarded-for", b"198.51.100.1, 198.51.100.2")]  # a spoofed entry left of bob's address
        assert [(await request(proxy, "GET", "/v1/models", headers=alice)).status for _ in range(11)] == \
            [200] * 10 + [429]
        assert (await request(proxy, "GET", "/v1/models", headers=bob)).status == 200


async def test_rate_limit_rejection_is_logged_with_a_key_hash_not_the_key(autojump_clock, caplog):
    caplog.set_level(logging.DEBUG, logger="switchyard.app")
    async with gateway(ONE) as app:
        for _ in range(13):
            await request(app, "GET", "/v1/models", headers=KEY_A)
    lines = [r for r in caplog.records if "rate limited" in r.getMessage()]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.DEBUG, logging.DEBUG]  # one warning per streak
    message = lines[0].getMessage()
    assert "for client key#" in message and "burst limit" in message
    assert "sk-client" not in caplog.text and "aaaaaaaa" not in caplog.text


# --- POST /v1/models/refresh -------------------------------------------------------------------


async def test_refresh_clears_the_cache_and_rediscovers(autojump_clock):
    async with gateway(DISCOVERED) as app:
        sim = app.runtime.upstream.simulated["a.simulated"]
        assert ids(await request(app, "GET", "/v1/models")) == []
        sim.models = ("llama-3-8b", "phi-3")
        assert ids(await request(app, "GET", "/v1/models")) == []          # cached
        before = sim.count("models")
        reply = await request(app, "POST", "/v1/models/refresh")
        assert reply.status == 200 and ids(reply) == ["llama-3-8b"]
        assert sim.count("models") == before + 2          # discovery ran again (both backends are on a.simulated)
        assert ids(await request(app, "GET", "/v1/models")) == ["llama-3-8b"]


async def test_refresh_limit_all_callers_share_one_global_bucket(autojump_clock):
    async with gateway(ONE) as app:
        one, two = from_peer(app, "203.0.113.1"), from_peer(app, "203.0.113.2")
        callers = [(one, KEY_A), (two, KEY_B), (one, [])]
        assert [(await request(c, "POST", "/v1/models/refresh", headers=h)).status for c, h in callers] == [200] * 3
        for c, h in [*callers, (two, [(b"authorization", b"Bearer forged-new-key-123456")])]:
            reply = await request(c, "POST", "/v1/models/refresh", headers=h)
            assert reply.status == 429 and "burst limit of 3 per 5s" in reply.json()["error"]["message"]
            assert reply.headers[b"retry-after"] == b"2"   # a token every 5/3 s


async def test_refresh_limit_sustained_12_per_minute(autojump_clock):
    async with gateway(ONE) as app:
        t0 = trio.current_time()
        admitted = {}
        for t in range(0, 30, 5):
            await trio.sleep_until(t0 + t)
            admitted[t] = [(await request(app, "POST", "/v1/models/refresh")).status for _ in range(3)]
        assert admitted[25] == [200, 200, 429]
        assert all(s == [200] * 3 for t, s in admitted.items() if t < 25)
        reply = await request(app, "POST", "/v1/models/refresh")
        assert "sustained limit of 12 per minute" in reply.json()["error"]["message"]
        assert reply.headers[b"retry-after"] == b"5"


async def test_refresh_is_post_only(autojump_clock):
    async with gateway(ONE) as app:
        reply = await request(app, "GET", "/v1/models/refresh")
        assert reply.status == 405 and reply.headers[b"allow"] == b"POST"


# --- /v1/models cache ---------------------------------------------------------------------------


async def test_empty_model_list_cached_5s_then_doubling(autojump_clock):
    async with gateway(DISCOVERED) as app:
        discovery = app.runtime.discovery
        t0 = trio.current_time()
        assert ids(await request(app, "GET", "/v1/models")) == []          # empty #1: kept 5 s
        await trio.sleep_until(t0 + 5)
        assert ids(await request(app, "GET", "/v1/models")) == []          # expired; empty #2: kept 10 s
        discovery.view = {**discovery.view, "globbed": frozenset({"llama-3-8b"})}
        await trio.sleep_until(t0 + 14.999)
        assert ids(await request(app, "GET", "/v1/models")) == []          # still the cached empty list
        await trio.sleep_until(t0 + 15)
        assert ids(await request(app, "GET", "/v1/models")) == ["llama-3-8b"]


async def test_empty_model_list_backoff_caps_at_60s(autojump_clock):
    async with gateway(DISCOVERED) as app:
        cache = app.model_routes.models_cache
        t0 = trio.current_time()
        expiries = []
        for at in (0, 5, 15, 35, 75, 135):   # each one the instant the previous empty list expires
            await trio.sleep_until(t0 + at)
            await request(app, "GET", "/v1/models")
            expiries.append(cache.expires - t0)
        assert expiries == [5, 15, 35, 75, 135, 195]


async def test_non_empty_model_list_cached_30s(autojump_clock):
    async with gateway(DISCOVERED.replace("[phi-3]", "[llama-3-8b]")) as app:
        discovery = app.runtime.discovery
        t0 = trio.current_time()
        assert ids(await request(app, "GET", "/v1/models")) == ["llama-3-8b"]
        discovery.view = {**discovery.view, "globbed": frozenset({"llama-3-8b", "llama-3-70b"})}
        await trio.sleep_until(t0 + 29.999)
        assert ids(await request(app, "GET", "/v1/models")) == ["llama-3-8b"]
        await trio.sleep_until(t0 + 30)
        assert ids(await request(app, "GET", "/v1/models")) == ["llama-3-70b", "llama-3-8b"]


# --- server.max_concurrent_requests --------------------------------------------------------------


async def test_max_concurrent_requests_over_the_cap_is_503(autojump_clock):
    config = "server: {max_concurrent_requests: 2}\n" + ONE.replace("latency: 10ms", "latency: 1s")
    async with gateway(config) as app:
        t0 = trio.current_time()
        done = []

        async def slow():
            done.append((await request(app, "POST", "/v1/chat/completions", chat(stream=True))).status)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            nursery.start_soon(slow)
            await trio.sleep_until(t0 + 0.5)
            assert app.active_requests == 2
            for method, path, body in [("POST", "/v1/chat/completions", chat()), ("GET", "/v1/models", None),
                                       ("POST", "/v1/models/refresh", None)]:
                reply = await request(app, method, path, body)
                error = reply.json()["error"]
                assert reply.status == 503, path
                assert (error["type"], error["code"]) == ("service_unavailable", "too_many_concurrent_requests")
                assert reply.headers[b"x-continuum-request-id"].startswith(b"req_")
            # /health, /ready and /metrics are not /v1 calls: never capped
            assert [(await request(app, "GET", p)).status for p in ("/health", "/ready", "/metrics")] == [200] * 3
        assert done == [200, 200] and app.active_requests == 0
        assert (await request(app, "POST", "/v1/chat/completions", chat())).status == 200


async def test_max_concurrent_requests_zero_means_no_cap(autojump_clock):
    async with gateway(ONE.replace("latency: 10ms", "latency: 1s")) as app, trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(request, app, "POST", "/v1/chat/completions", chat())
        await trio.sleep(0.5)
        assert app.active_requests == 50
        assert (await request(app, "POST", "/v1/chat/completions", chat())).status == 200
