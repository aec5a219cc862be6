"""routing.cache_affinity on the request path, in virtual time: three deployments of one model, calls
sticky by prompt_cache_key or by prompt prefix, a home taken down and back, the load bound moving a hot
key, route events and the metric; off by default."""

import json
import re

import attrs
import pytest
import trio

from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TOKEN = "test-admin-token-0123456789"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]


def config(affinity: str = "routing: {cache_affinity: {enabled: true}}", latency: str = "10ms") -> str:
    return f"""
admin: {{token: {TOKEN}}}
health_checks: {{interval: 1s, unhealthy_threshold: 1, healthy_threshold: 1, warmup_check_interval: 1s}}
{affinity}
backends:
  - {{name: a, type: simulated, models: [demo], simulation: {{latency: {latency}, chunks: 2}}}}
  - {{name: b, type: simulated, models: [demo], simulation: {{latency: {latency}, chunks: 2}}}}
  - {{name: c, type: simulated, models: [demo], simulation: {{latency: {latency}, chunks: 2}}}}
"""


def served_by(reply) -> str:
    assert reply.status == 200, reply.body
    return re.search(r"Hello from (\w+)", reply.json()["choices"][0]["message"]["content"]).group(1)


async def call(app, **body):
    return await request(app, "POST", "/v1/chat/completions", chat(**body))


async def events(app, reply) -> list[dict]:
    rid = reply.headers[b"x-continuum-request-id"].decode()
    got = await request(app, "GET", f"/admin/requests/{rid}/events", headers=AUTH)
    return got.json()["events"]


KEYS = [f"conversation-{i}" for i in range(5)]   # not a multiple of 3: RoundRobin would move each key


async def test_calls_with_one_prompt_cache_key_stay_on_one_deployment(autojump_clock):
    async with gateway(config()) as app:
        homes = {}
        for _ in range(4):                       # RoundRobin would rotate a, b, c
            for key in KEYS:
                homes.setdefault(key, set()).add(served_by(await call(app, prompt_cache_key=key)))
        assert all(len(seen) == 1 for seen in homes.values()), homes
        assert len(set().union(*homes.values())) > 1        # different keys spread over the deployments
        # the key went upstream unchanged
        sent = [json.loads(r.content) for name in "abc" for r in app.runtime.upstream.simulated[f"{name}.simulated"]
                .requests if r.url.path.endswith("/chat/completions")]
        assert sorted(s["prompt_cache_key"] for s in sent) == sorted(KEYS * 4)


async def test_a_home_taken_down_sends_its_keys_to_one_other_deployment_and_they_come_back(autojump_clock):
    async with gateway(config()) as app:
        await trio.sleep(0.5)
        home = served_by(await call(app, prompt_cache_key="k"))
        sim = app.runtime.upstream.simulated[f"{home}.simulated"]
        healthy = sim.simulation
        sim.simulation = attrs.evolve(healthy, health_status=503)
        await trio.sleep(2)                      # a failed check: unhealthy
        during = [served_by(await call(app, prompt_cache_key="k")) for _ in range(4)]
        assert len(set(during)) == 1 and during[0] != home   # the next on the ring, every time
        sim.simulation = healthy
        await trio.sleep(2)                      # a passing check: healthy again
        assert {served_by(await call(app, prompt_cache_key="k")) for _ in range(3)} == {home}


async def test_the_load_bound_moves_a_hot_key_to_the_next_deployment(autojump_clock):
    async with gateway(config(latency="1s")) as app:
        replies = []

        async def one(delay):
            await trio.sleep(delay)
            replies.append(await call(app, prompt_cache_key="hot"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, 0)
            nursery.start_soon(one, 0.1)     # the home has one in flight: past ceil(1.25 * 2 / 3) = 1
        first, second = replies
        assert served_by(first) != served_by(second)
        placed = [e for e in await events(app, second) if e["event"] == "cache_affinity"]
        assert placed[0]["backend"] == served_by(second)
        assert placed[0]["detail"] == {"key": "prompt_cache_key", "home": served_by(first), "moved": True}
        # once the home is idle again, the key is back
        assert served_by(await call(app, prompt_cache_key="hot")) == served_by(first)


SYSTEM = "You are the support assistant of a hardware shop. " * 8     # longer than max_prefix_length 256


async def test_calls_sharing_a_prompt_prefix_stay_together_without_a_key(autojump_clock):
    async with gateway(config()) as app:
        seen = set()
        for question in ("Where is my order?", "Can I return a drill?", "Do you ship abroad?", "Opening hours?"):
            messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
            seen.add(served_by(await call(app, messages=messages)))
        assert len(seen) == 1
        reply = await call(app, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "?"}])
        placed = [e for e in await events(app, reply) if e["event"] == "cache_affinity"]
        assert placed[0]["detail"] == {"key": "prefix", "home": seen.pop(), "moved": False}


async def test_a_prompt_cache_key_wins_over_the_prefix(autojump_clock):
    async with gateway(config()) as app:
        homes = {}
        for key in KEYS:
            for shop in ("hardware", "garden", "book"):     # three prefixes, one key: the key decides
                messages = [{"role": "system", "content": SYSTEM.replace("hardware", shop)},
                            {"role": "user", "content": "hi"}]
                homes.setdefault(key, set()).add(served_by(await call(app, messages=messages, prompt_cache_key=key)))
        assert all(len(seen) == 1 for seen in homes.values()), homes


async def test_affinity_is_off_by_default(autojump_clock):
    async with gateway(config(affinity="")) as app:
        picks = [served_by(await call(app, prompt_cache_key="k")) for _ in range(3)]
        assert sorted(picks) == ["a", "b", "c"]                  # RoundRobin, as before
        assert not [e for e in await events(app, await call(app, prompt_cache_key="k"))
                    if e["event"] == "cache_affinity"]


async def test_each_placement_is_counted_in_the_metric(autojump_clock):
    async with gateway(config(latency="1s")) as app:
        async with trio.open_nursery() as nursery:
            for delay in (0, 0.1):   # the second finds the home busy
                nursery.start_soon(_later, app, delay)
        await call(app, messages=[{"role": "user", "content": "no key"}])
        text = (await request(app, "GET", "/metrics")).body.decode()
        lines = re.findall(r'^routing_cache_affinity_decisions_total\{backend="(\w)",key="(\w+)",outcome="(\w+)"\} '
                           r'(\d+)\.0$', text, re.M)
        assert sorted((kind, outcome, int(n)) for _, kind, outcome, n in lines) == \
            [("prefix", "home", 1), ("prompt_cache_key", "home", 1), ("prompt_cache_key", "moved", 1)]


async def _later(app, delay):
    await trio.sleep(delay)
    await call(app, prompt_cache_key="hot")
