"""kv_cache_index on the request path, in virtual time with simulated backends: the gateway's own record
(approximate mode) keeping a conversation on its backend, the load bound moving a hot prefix, an engine's
events making it preferred and an unknown backend never preferred for its entries, a reload changing the
block size, the route event, the metric and the admin view; off by default."""

import json
import re

import trio

from switchyard.actors.kv.events import BlockStored, EventBatch, SourceState
from switchyard.actors.kv.sim_tokens import SimulatedTokenizer
from switchyard.config.load import load_text
from tests.harness import chat, gateway, request

TOKEN = "test-admin-token-0123456789"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]


def config(index: str = "kv_cache_index: {enabled: true}", latency: str = "10ms", names: str = "abc") -> str:
    backends = "".join(f"  - {{name: {n}, type: simulated, models: [demo], "
                       f"simulation: {{latency: {latency}, chunks: 2}}}}\n" for n in names)
    return f"""
admin: {{token: {TOKEN}}}
health_checks: {{interval: 1h}}
{index}
backends:
{backends}"""


def opening(topic: str) -> list[dict]:
    """A conversation's first turn: a system prompt of its own, several blocks long."""
    return [{"role": "system", "content": f"{topic}: you are the assistant of this topic alone. " * 6},
            {"role": "user", "content": f"Tell me about {topic}."}]


def served_by(reply) -> str:
    assert reply.status == 200, reply.body
    return re.search(r"Hello from (\w+)", reply.json()["choices"][0]["message"]["content"]).group(1)


async def call(app, messages):
    return await request(app, "POST", "/v1/chat/completions", chat(messages=messages))


async def kv_route(app, reply) -> dict:
    rid = reply.headers[b"x-continuum-request-id"].decode()
    events = (await request(app, "GET", f"/admin/requests/{rid}/events", headers=AUTH)).json()["events"]
    found = [e for e in events if e["event"] == "kv_route"]
    assert len(found) == 1, events
    return {"backend": found[0]["backend"], **found[0]["detail"]}


async def admin_index(app) -> dict:
    body = (await request(app, "GET", "/admin/backends", headers=AUTH)).json()
    return {b["name"]: b["kv_index"] for b in body["backends"]}


async def test_a_conversations_second_turn_goes_to_the_backend_that_served_the_first(autojump_clock):
    async with gateway(config()) as app:
        firsts = {}
        for topic in ("drills", "gardens", "books"):        # RoundRobin spreads the first turns
            reply = await call(app, opening(topic))
            firsts[topic] = (served_by(reply), reply.json()["choices"][0]["message"]["content"])
        assert sorted(b for b, _ in firsts.values()) == ["a", "b", "c"]
        for topic, (backend, answer) in firsts.items():   # RoundRobin would have moved each of them
            follow = [*opening(topic), {"role": "assistant", "content": answer}, {"role": "user", "content": "More."}]
            reply = await call(app, follow)
            assert served_by(reply) == backend
            route = await kv_route(app, reply)
            assert route["reason"] == "overlap" and route["backend"] == backend
            others = {name: held for name, held in route["held"].items() if name != backend}
            assert route["held"][backend] > 0.5 * route["total_blocks"] and set(others.values()) == {0.0}


async def test_the_load_bound_moves_a_hot_prefix_to_another_backend(autojump_clock):
    async with gateway(config(latency="1s")) as app:
        replies = []

        async def one(delay):
            await trio.sleep(delay)
            replies.append(await call(app, opening("hot")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, 0)
            nursery.start_soon(one, 0.1)     # the holder has one in flight: past ceil(1.25 * 2 / 3) = 1
        first, second = replies
        assert served_by(first) != served_by(second)
        route = await kv_route(app, second)
        assert route["reason"] == "overloaded" and route["held"][served_by(first)] == route["total_blocks"]
        # once the holder is idle again, the prefix is back there
        again = await call(app, opening("hot"))
        assert served_by(again) == served_by(first) and (await kv_route(app, again))["reason"] == "overlap"


def stored(messages, hashes_from=1000, block_size=16) -> BlockStored:
    """What a simulated engine's events say once it has cached the prompt's full blocks."""
    tokens = SimulatedTokenizer().chat(messages)
    full = len(tokens) // block_size
    return BlockStored(tuple(range(hashes_from, hashes_from + full)), None, tuple(tokens[:full * block_size]),
                       block_size)


SOURCE = "kv_cache_index: {enabled: true, event_sources: {a: {endpoint: 'tcp://127.0.0.1:5557'}}}"


async def test_an_engines_events_make_it_the_holder(autojump_clock):
    async with gateway(config(SOURCE, names="ab")) as app:
        kv = app.runtime.kv_index
        kv.state(SourceState("a", up=True))
        kv.apply("a", EventBatch(0, 0.0, (stored(opening("events")),)))
        for _ in range(3):                                  # RoundRobin would alternate
            reply = await call(app, opening("events"))
            assert served_by(reply) == "a"
        route = await kv_route(app, reply)
        assert route["reason"] == "overlap" and route["held"]["b"] == 0.0
        assert route["held"]["a"] == route["total_blocks"]
        assert (await admin_index(app))["a"]["state"] == "events"


async def test_an_unknown_backend_is_never_preferred_for_its_entries(autojump_clock):
    async with gateway(config(SOURCE, names="ab")) as app:
        kv = app.runtime.kv_index
        kv.state(SourceState("a", up=True))
        kv.apply("a", EventBatch(0, 0.0, (stored(opening("events")),)))
        kv.state(SourceState("a", up=False, reason="gap"))   # its events stopped: what it holds is unknown
        routes = []
        for _ in range(4):
            routes.append(await kv_route(app, await call(app, opening("events"))))
        assert all(r["held"]["a"] is None for r in routes)
        assert not [r for r in routes if r["backend"] == "a" and r["reason"] in ("overlap", "overloaded")]
        assert routes[0]["reason"] == "below_threshold"      # b holds none of it yet: the strategy picks
        shown = (await admin_index(app))["a"]
        source = shown.pop("source")
        assert shown == {"state": "unknown", "entries": 0, "picks": 0, "hits": 0, "hit_ratio": None}
        assert source["up"] is False and source["batches"] == 0   # its reader has nothing to say yet


async def test_a_reload_changing_the_block_size_empties_the_index(autojump_clock):
    async with gateway(config()) as app:
        for topic in ("drills", "gardens", "books"):
            await call(app, opening(topic))
        assert all(found["entries"] > 0 for found in (await admin_index(app)).values())
        rt = app.runtime
        rt.apply(load_text(config("kv_cache_index: {enabled: true, block_size: 32}")).snapshot)
        assert all(found["entries"] == 0 for found in (await admin_index(app)).values())
        rt.apply(load_text(config("kv_cache_index: {enabled: true, block_size: 32}", names="ab")).snapshot)
        assert set(await admin_index(app)) == {"a", "b"}
        assert rt.kv_index.index.view("c") is None        # a backend removed is dropped


async def test_each_decision_is_counted_and_the_admin_view_shows_the_hit_ratio(autojump_clock):
    async with gateway(config(names="ab")) as app:
        first = await call(app, opening("metrics"))
        await call(app, opening("metrics"))
        text = (await request(app, "GET", "/metrics")).body.decode()
        lines = re.findall(r'^routing_kv_decisions_total\{backend="(\w)",reason="(\w+)"\} (\d+)\.0$', text, re.M)
        holder = served_by(first)
        assert sorted(lines) == [(holder, "below_threshold", "1"), (holder, "overlap", "1")]
        assert f'kv_index_entries{{backend="{holder}"}}' in text
        shown = (await admin_index(app))[holder]
        assert shown["state"] == "approximate" and shown["picks"] == 2 and shown["hit_ratio"] == 0.5


async def test_the_index_is_off_by_default(autojump_clock):
    async with gateway(config(index="")) as app:
        picks = [served_by(await call(app, opening("same"))) for _ in range(3)]
        assert sorted(picks) == ["a", "b", "c"]                  # RoundRobin, as before
        reply = await call(app, opening("same"))
        rid = reply.headers[b"x-continuum-request-id"].decode()
        events = (await request(app, "GET", f"/admin/requests/{rid}/events", headers=AUTH)).json()["events"]
        assert not [e for e in events if e["event"] == "kv_route"]
        body = (await request(app, "GET", "/admin/backends", headers=AUTH)).json()
        assert body["kv_cache_index_enabled"] is False
        assert {b["kv_index"]["entries"] for b in body["backends"]} == {0}


async def test_a_prompt_shorter_than_one_block_is_routed_by_the_strategy(autojump_clock):
    async with gateway(config()) as app:
        replies = [await request(app, "POST", "/v1/chat/completions", chat()) for _ in range(3)]   # "hi"
        assert sorted(served_by(r) for r in replies) == ["a", "b", "c"]
        assert (await kv_route(app, replies[-1]))["reason"] == "no_blocks"



async def test_a_prompt_past_the_scored_bound_is_not_keyed():
    """Tokenizing and hashing a huge prompt would hold the event loop: its pick is the index-off pick."""
    from switchyard.actors.kv.pick import MAX_SCORED_BODY, prompt_keys
    from switchyard.actors.messages import Call
    from switchyard.config.endpoints import Endpoint
    from switchyard.config.load import load_text
    snapshot = load_text("""
prefix_routing: {enabled: true}
kv_cache_index: {enabled: true}
backends:
  - {name: a, type: simulated, models: [demo]}
""").snapshot
    def call(words: int) -> Call:
        body = json.dumps({"model": "demo", "messages": [{"role": "user", "content": "word " * words}]}).encode()
        return Call(model="demo", stream=False, body=body, payload=json.loads(body), snapshot=snapshot,
                    endpoint=Endpoint.CHAT)

    assert prompt_keys(call(MAX_SCORED_BODY // 5 + 1), "demo", snapshot.backends, 16) is None
    assert prompt_keys(call(1000), "demo", snapshot.backends, 16)   # under the bound: keyed
