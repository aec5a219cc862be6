"""The client's `provider` object on the request path: switch, body hygiene, reach, ranking, refusals.

The parser and the pure ranking have their own unit tests; these check the
rules of provider-preferences.en.txt where they meet keys, selection,
retries, fallback and the bytes a backend receives.
"""

import json
import re

import pytest

from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

BACKENDS = """
health_checks: {interval: 1h}
selection_strategy: RoundRobin
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2},
     model_configs: [{id: demo, metadata: {pricing: {input_tokens: 3, output_tokens: 3}}}]}
  - {name: b, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2},
     model_configs: [{id: demo, metadata: {pricing: {input_tokens: 1, output_tokens: 1}}}]}
  - {name: c, type: simulated, models: [demo, spare], simulation: {latency: 10ms, chunks: 2}}
"""
ON = BACKENDS + "proxy: {client_provider_preferences: true}\n"
KEYED = ON + """
api_keys:
  - {id: team, key: sk-team-0123456789abcdef, allowed_backends: [a, c]}
"""
TEAM = [(b"authorization", b"Bearer sk-team-0123456789abcdef")]


def served_by(reply) -> str:
    return re.search(r"Hello from (\w+)", reply.json()["choices"][0]["message"]["content"]).group(1)


def sent_bodies(app, backend: str) -> list[dict]:
    return [json.loads(r.content) for r in app.runtime.upstream.simulated[f"{backend}.simulated"].requests
            if r.url.path.endswith("/chat/completions")]


def dialed(app) -> int:
    return sum(len(sent_bodies(app, name)) for name in ("a", "b", "c"))


async def call(app, provider, model="demo", headers=None, stream=False):
    return await request(app, "POST", "/v1/chat/completions", chat(model, stream=stream, provider=provider),
                         headers=headers)


async def test_switch_off_passes_provider_through_untouched(autojump_clock):
    async with gateway(BACKENDS) as app:
        provider = {"only": ["nobody"], "anything": [1, 2]}
        reply = await call(app, provider)
        assert reply.status == 200
        assert [b for name in "abc" for b in sent_bodies(app, name)][0]["provider"] == provider


async def test_switch_on_removes_provider_before_dispatch(autojump_clock):
    async with gateway(ON) as app:
        for _ in range(3):
            assert (await call(app, {"order": ["a"]})).status == 200
        assert all("provider" not in b for name in "abc" for b in sent_bodies(app, name))


async def test_overrides_provider_reaches_the_backend_not_the_clients_object(autojump_clock):
    config = ON.replace("models: [demo, spare], simulation: {latency: 10ms, chunks: 2}",
                        "models: [demo, spare], simulation: {latency: 10ms, chunks: 2}, request_extensions: "
                        "{body: {overrides: {provider: {allow_fallbacks: false}}}}")
    async with gateway(config) as app:
        assert (await call(app, {"only": ["c"], "sort": "latency"})).status == 200
        assert [b["provider"] for b in sent_bodies(app, "c")] == [{"allow_fallbacks": False}]


async def test_only_and_ignore_are_hard_filters(autojump_clock):
    async with gateway(ON) as app:
        assert {served_by(await call(app, {"only": ["a", "c"]})) for _ in range(6)} == {"a", "c"}
        assert {served_by(await call(app, {"ignore": ["a"]})) for _ in range(6)} == {"b", "c"}


async def test_max_price_filters_out_dear_and_unpriced_backends(autojump_clock):
    async with gateway(ON) as app:
        picks = {served_by(await call(app, {"max_price": {"prompt": 2, "completion": 2}})) for _ in range(4)}
        assert picks == {"b"}   # a costs 3; c has no known price, so it cannot be shown to be under


async def test_order_ranks_and_the_strategy_rotates_only_inside_the_best_group(autojump_clock):
    async with gateway(ON) as app:
        assert {served_by(await call(app, {"order": ["c"]})) for _ in range(4)} == {"c"}
        # sort by price: b is cheapest; c (no price) trails
        assert {served_by(await call(app, {"sort": "price"})) for _ in range(4)} == {"b"}


async def test_candidates_equal_on_every_stated_key_share_the_strategy(autojump_clock):
    config = ON.replace("input_tokens: 3, output_tokens: 3", "input_tokens: 1, output_tokens: 1")
    async with gateway(config) as app:
        assert {served_by(await call(app, {"sort": "price"})) for _ in range(6)} == {"a", "b"}


async def test_missing_telemetry_joins_one_trailing_group(autojump_clock):
    async with gateway(ON) as app:
        # no latency measured yet for anyone: one group, the configured round robin decides
        assert {served_by(await call(app, {"sort": "throughput"})) for _ in range(6)} == {"a", "b", "c"}


async def test_sort_latency_uses_the_pools_average(autojump_clock):
    async with gateway(ON) as app:
        app.runtime.pool.latency.update({"a": 0.5, "b": 0.1, "c": 0.9})
        # each answer updates the average; b stays fastest by a wide margin
        assert {served_by(await call(app, {"sort": "latency"})) for _ in range(3)} == {"b"}


async def test_order_reapplies_on_every_attempt(autojump_clock):
    config = ON.replace("name: b, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2}",
                        "name: b, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2, "
                        "failure: {status: 503}}")
    config += "retry: {max_attempts: 1}\n"
    async with gateway(config) as app:
        reply = await call(app, {"order": ["b", "a", "c"]})
        # b failed; the next attempt goes to the next in order, not wherever the strategy points
        assert reply.status == 200 and served_by(reply) == "a"


async def test_a_filter_that_empties_the_set_is_400_without_upstream_io(autojump_clock):
    async with gateway(ON) as app:
        reply = await call(app, {"only": ["nobody"]})
        assert reply.status == 400
        err = reply.json()["error"]
        assert (err["code"], err["param"]) == ("provider_preferences_unsatisfiable", "provider.only")
        assert dialed(app) == 0


async def test_refusal_is_never_a_fallback_trigger_streaming_too(autojump_clock):
    # demo is served by a, b and c; the chain model `spare` by c alone, which the filter leaves
    config = ON.replace("models: [demo, spare]", "models: [spare]") + \
        "fallback: {enabled: true, fallback_chains: {demo: [spare]}}\n"
    async with gateway(config) as app:
        for stream in (False, True):
            reply = await call(app, {"ignore": ["a", "b"]}, stream=stream)
            assert reply.status == 400 and reply.json()["error"]["code"] == "provider_preferences_unsatisfiable"
        assert dialed(app) == 0


async def test_client_filters_never_widen_the_keys_allowlist(autojump_clock):
    async with gateway(KEYED) as app:
        reply = await call(app, {"only": ["b"]}, headers=TEAM)
        assert reply.status == 400   # the key may not use b: the intersection is empty
        assert {served_by(await call(app, {"only": ["a", "b"]}, headers=TEAM)) for _ in range(4)} == {"a"}
        assert {served_by(await call(app, {"order": ["b"]}, headers=TEAM)) for _ in range(4)} <= {"a", "c"}
        assert sent_bodies(app, "b") == []


async def test_x_backend_wins_the_first_attempt_over_provider(autojump_clock):
    async with gateway(ON) as app:
        reply = await call(app, {"order": ["a"], "ignore": ["c"]}, headers=[(b"x-backend", b"c")])
        assert reply.status == 200 and served_by(reply) == "c"


async def test_invalid_provider_object_is_400_naming_the_exact_path(autojump_clock):
    async with gateway(ON) as app:
        reply = await call(app, {"only": ["a", "b", "c", 7]})
        assert reply.status == 400 and reply.json()["error"]["param"] == "provider.only[3]"
        reply = await call(app, {"max_price": {"prompt": 1, "image": 2}})
        assert reply.status == 400 and reply.json()["error"]["param"] == "provider.max_price.image"
        reply = await call(app, {"require_parameters": True})
        assert reply.status == 400 and reply.json()["error"]["code"] == "unsupported_provider_preference"
        assert dialed(app) == 0


async def test_calls_with_preferences_never_join_anothers_dispatch(autojump_clock):
    import trio

    config = ON.replace("chunks: 2}", "chunks: 2, latency: 1s}").replace("latency: 10ms, ", "") + \
        "dedup: {enabled: true}\n"
    async with gateway(config) as app:
        plain, preferring = [], []
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(lambda: plain.append(0) or request(app, "POST", "/v1/chat/completions", chat()))
        assert dialed(app) == 1   # identical calls without preferences share one upstream call
        async with trio.open_nursery() as nursery:
            for only in (["a"], ["a", "b", "c"]):
                async def one(only=only):
                    preferring.append((await call(app, {"only": only})).status)
                nursery.start_soon(one)
        assert preferring == [200, 200] and dialed(app) == 3   # same body once `provider` is gone, yet two calls
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'dedup_requests_total{role="followed"} 1.0' in metrics


async def test_dedup_never_shares_an_answer_across_api_keys(autojump_clock):
    import trio

    config = ON.replace("chunks: 2}", "chunks: 2, latency: 1s}").replace("latency: 10ms, ", "") + """
dedup: {enabled: true}
api_keys:
  - {id: one, key: sk-one-0123456789abcdef}
  - {id: two, key: sk-two-0123456789abcdef}
"""
    async with gateway(config) as app:
        async with trio.open_nursery() as nursery:
            for secret in (b"sk-one-0123456789abcdef", b"sk-two-0123456789abcdef", b"sk-one-0123456789abcdef"):
                nursery.start_soon(lambda s=secret: request(app, "POST", "/v1/chat/completions", chat(),
                                                            headers=[(b"authorization", b"Bearer " + s)]))
        assert dialed(app) == 2   # the two calls of key `one` shared; key `two` got its own
