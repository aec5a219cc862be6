"""The x-backend header pins a call's first attempt to one backend."""

import re

import trio

from tests.harness import chat, gateway, request

CONFIG = """
health_checks: {interval: 1h, unhealthy_threshold: 1}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2}}
  - {name: b, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2}}
  - {name: c, type: simulated, models: [other], simulation: {latency: 10ms, chunks: 2}}
"""


def served_by(reply):
    return re.search(r"Hello from (\w+)", reply.json()["choices"][0]["message"]["content"]).group(1)


async def test_pin_sends_every_first_attempt_to_that_backend(autojump_clock):
    async with gateway(CONFIG) as app:
        picks = {served_by(await request(app, "POST", "/v1/chat/completions", chat(),
                                         headers=[(b"x-backend", b"b")])) for _ in range(4)}
        assert picks == {"b"}


async def test_pin_to_a_backend_not_serving_the_model_is_400(autojump_clock):
    async with gateway(CONFIG) as app:
        for pin in (b"c", b"nope"):
            reply = await request(app, "POST", "/v1/chat/completions", chat(), headers=[(b"x-backend", pin)])
            assert reply.status == 400
            assert (reply.json()["error"]["param"], reply.json()["error"]["code"]) == \
                ("x-backend", "invalid_backend_pin")


async def test_malformed_pin_is_400_naming_the_header(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(), headers=[(b"x-backend", b"a b")])
        assert reply.status == 400 and reply.json()["error"]["param"] == "x-backend"


async def test_pin_to_an_unhealthy_backend_is_given_up(autojump_clock):
    async with gateway(CONFIG.replace("models: [demo], simulation: {latency: 10ms, chunks: 2}}\n  - {name: b",
                                      "models: [demo], simulation: {latency: 10ms, chunks: 2, health_status: 500}}"
                                      "\n  - {name: b")) as app:
        await trio.sleep(0.01)
        reply = await request(app, "POST", "/v1/chat/completions", chat(), headers=[(b"x-backend", b"a")])
        assert reply.status == 200 and served_by(reply) == "b"


async def test_pinned_variant_call_reports_not_applied(autojump_clock):
    config = "proxy: {variant_suffixes: {enabled: true}}\n" + CONFIG
    async with gateway(config) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("demo:floor"),
                              headers=[(b"x-backend", b"a")])
        assert reply.status == 200 and served_by(reply) == "a"
        assert reply.headers[b"x-continuum-model-variant-applied"] == b"false"
