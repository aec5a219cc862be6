"""The ``:online`` loop on buffered /v1/chat/completions under MockClock: rounds as attempts, searches as
ledger records, failover between providers, the domain rules, the cap, citations, refusals, the cache."""

import contextlib
import json

import attrs
import pytest
import trio

from switchyard.actors.ledger.record import UsageQuery
from switchyard.config.load import load_text
from switchyard.protocol.search.client import ProviderSearch
from switchyard.protocol.serving.app import App
from switchyard.protocol.serving.wiring import new_runtime
from tests.harness import chat, request
from tests.search_fakes import KEYS, FakeSearch

pytestmark = pytest.mark.simulator_history   # reads what the simulated backend saw

BASE = "http://search.test"
CONFIG = """
health_checks: {interval: 1h}
usage: {ledger: memory}
proxy: {variant_suffixes: {enabled: true}}
backends:
  - name: a
    type: simulated
    models: [demo]
    simulation: {latency: 100ms, chunks: 4, call_tools: true, text: "Trio is async [1], see https://docs.example.org/switchyard."}
    model_configs: [{id: demo, metadata: {pricing: {input_tokens: 1000000, output_tokens: 1000000}}}]
web_search:
  providers: PROVIDERS
  timeout: 2s
EXTRA
"""


def config(providers=("searxng",), extra=""):
    listed = [{"name": p, "type": p, "endpoint": FakeSearch().endpoints(BASE)[p],
               **({"api_key": KEYS[p]} if p in KEYS else {}), "cost_per_search": 0.01} for p in providers]
    return CONFIG.replace("PROVIDERS", json.dumps(listed)).replace("EXTRA", extra)


@contextlib.asynccontextmanager
async def online_gateway(text, fake):
    """A gateway whose search providers are ``fake``, in process (no socket under MockClock)."""
    snapshot = load_text(text).snapshot
    async with trio.open_nursery() as nursery:
        runtime = await nursery.start(new_runtime(snapshot, search=ProviderSearch(fake.client())).run)
        yield App(lambda: snapshot, runtime=runtime)
        nursery.cancel_scope.cancel()


def sim(app):
    return app.runtime.upstream.simulated["a.simulated"]


def sent(app):
    return [json.loads(r.content) for r in sim(app).requests if r.url.path.endswith("/chat/completions")]


async def records(app):
    await app.runtime.ledger.flush()
    return app.runtime.ledger.store.records(UsageQuery(purpose=None), 1000)


async def ask(app, model="demo:online", **extra):
    return await request(app, "POST", "/v1/chat/completions", chat(model, **extra))


def script(app, **changes):
    """The next request to the backend answers with ``changes`` to its simulation (``tool_call``: a forced call)."""
    s = sim(app).simulation
    forced = changes.pop("tool_call", False)
    sim(app).script.append(attrs.evolve(s, failure=attrs.evolve(s.failure, tool_call=forced), **changes))


def searches(rows):
    return [r for r in rows if r.purpose == "web_search"]


def calls(rows):
    return [r for r in rows if r.purpose == "client"]


def tool_messages(body):
    return [m["content"] for m in body["messages"] if m.get("role") == "tool"]


async def test_three_rounds_are_three_priced_attempts_and_three_search_records(autojump_clock):
    fake = FakeSearch()
    async with online_gateway(config(), fake) as app:
        script(app, tool_calls=2)       # round 1: two searches side by side
        script(app, tool_call=True)     # round 2: one more, though it has results already
        reply = await ask(app)          # round 3: the last, offered no web_search: it answers
        rows = await records(app)
    assert reply.status == 200, reply.body
    assert [len([t for t in b.get("tools", ()) if t["function"]["name"] == "web_search"]) for b in sent(app)] \
        == [1, 1, 0]
    [call] = calls(rows)
    assert call.attempts == 3 and call.status == 200
    # priced at one dollar a token: every round's tokens, in one cost
    assert call.input_tokens > 0 and call.cost == call.input_tokens + call.output_tokens
    # the whole call's cost: the rounds' and the three searches' at 0.01
    assert reply.headers[b"x-continuum-cost"] == f"{int(call.cost)}.03".encode()
    found = searches(rows)
    assert len(found) == 3
    assert {(r.request_id, r.backend, r.cost, r.status) for r in found} == {(call.request_id, "searxng", 0.01, 200)}
    events = [e["event"] for e in json.loads(call.route_events)["events"]]
    assert events.count("selected") == 3 and events.count("web_searched") == 3


async def test_the_answer_cites_the_sources_it_marked_or_quoted(autojump_clock):
    async with online_gateway(config(), FakeSearch()) as app:
        reply = await ask(app)
    body = reply.json()
    message = body["choices"][0]["message"]
    assert message["content"] == "Trio is async [1], see https://docs.example.org/switchyard."
    assert message["annotations"] == [
        {"type": "url_citation", "url_citation": {"url": "https://trio.readthedocs.io/en/stable/",
                                                  "title": "Trio docs", "start_index": 14, "end_index": 17}},
        {"type": "url_citation", "url_citation": {"url": "https://docs.example.org/switchyard",
                                                  "title": "Switchyard", "start_index": 23, "end_index": 58}}]
    assert body["model"] == "demo:online"
    assert reply.headers[b"x-continuum-model-variant"] == b"online"
    assert "tool_calls" not in message


async def test_a_client_tool_call_goes_back_to_the_client_as_it_is(autojump_clock):
    own = {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}}
    async with online_gateway(config(), FakeSearch()) as app:
        reply = await ask(app, tools=[own], tool_choice={"type": "function", "function": {"name": "lookup"}})
        rows = await records(app)
    message = reply.json()["choices"][0]["message"]
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["lookup"]
    [body] = sent(app)
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup", "web_search"]
    assert searches(rows) == []


async def test_a_client_tool_named_web_search_is_refused(autojump_clock):
    clash = {"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}
    async with online_gateway(config(), FakeSearch()) as app:
        reply = await ask(app, tools=[clash])
    assert reply.status == 400
    assert reply.json()["error"]["param"] == "tools[0].function.name"
    assert sent(app) == []


@pytest.mark.parametrize("mode", ["slow", "500", "401", "garbage", "wrong"])
async def test_a_failing_provider_hands_the_search_to_the_next(autojump_clock, mode):
    fake = FakeSearch()
    fake.modes["searxng"] = mode
    async with online_gateway(config(("searxng", "brave")), fake) as app:
        reply = await ask(app)
        rows = await records(app)
    assert reply.status == 200
    assert [p for p, _ in fake.seen] == ["searxng", "brave"]
    [record] = searches(rows)
    assert (record.backend, record.attempts, record.status, record.cost) == ("brave", 2, 200, 0.01)
    # two rounds of 100 ms, and the search: a slow provider is given up at web_search.timeout (2 s) exactly
    assert reply.ended_at == pytest.approx(0.2 + (2.0 if mode == "slow" else 0.0))
    assert tool_messages(sent(app)[1])[0].startswith('Search results for "hi"')


async def test_when_every_provider_fails_the_model_is_told_and_the_call_answers(autojump_clock):
    fake = FakeSearch()
    fake.modes.update(searxng="503", tavily="slow")
    async with online_gateway(config(("searxng", "tavily")), fake) as app:
        reply = await ask(app)
        rows = await records(app)
    assert reply.status == 200 and reply.ended_at == pytest.approx(2.2)
    [told] = tool_messages(sent(app)[1])
    assert told.startswith('web_search failed for "hi": no search provider answered (searxng: answered HTTP 503; '
                           'tavily: no answer within 2s)')
    [record] = searches(rows)
    assert (record.backend, record.status, record.error_code, record.cost) == ("tavily", 502, "web_search_failed", None)


async def test_searches_never_outlive_the_calls_budget(autojump_clock):
    fake = FakeSearch()
    fake.modes["searxng"] = "slow"
    budget = "timeouts: {request: {standard: {first_byte: 1s, total: 1s}}}\n"   # the call's budget: 2 x 1 s
    async with online_gateway(config(extra=budget).replace("timeout: 2s", "timeout: 30s"), fake) as app:
        reply = await ask(app)
    # the search is cut where the budget ends, and the call ends there with the budget's error: nothing hangs
    assert reply.ended_at == pytest.approx(2.0)
    assert reply.status == 504
    assert reply.json()["error"]["details"]["timeout"] == "fallback_budget"


@pytest.mark.parametrize("rules, urls", [
    ("allow_domains: [example.org]", ["https://docs.example.org/switchyard"]),
    ("deny_domains: [example.net, readthedocs.io]", ["https://docs.example.org/switchyard"]),
    ("allow_domains: [docs.example.org, trio.readthedocs.io]",
     ["https://trio.readthedocs.io/en/stable/", "https://docs.example.org/switchyard"]),
])
async def test_results_outside_the_domain_rules_are_never_injected(autojump_clock, rules, urls):
    async with online_gateway(config(extra=f"  {rules}\n"), FakeSearch()) as app:
        await ask(app)
        rows = await records(app)
    [told] = tool_messages(sent(app)[1])
    assert [line[len("URL: "):] for line in told.splitlines() if line.startswith("URL: ")] == urls
    dropped = json.loads(calls(rows)[0].route_events)["events"]
    assert [e["detail"]["dropped"] for e in dropped if e["event"] == "web_searched"] == [3 - len(urls)]


async def test_the_text_fed_back_per_search_is_capped(autojump_clock):
    async with online_gateway(config(extra="  max_injected_chars: 200\n"), FakeSearch()) as app:
        reply = await ask(app)
    [told] = tool_messages(sent(app)[1])
    assert len(told) <= 200
    assert "[1] Trio docs" in told and "[3]" not in told and told.endswith("...")
    # a source the model was never shown is never cited
    urls = [a["url_citation"]["url"] for a in reply.json()["choices"][0]["message"]["annotations"]]
    assert "https://spam.example.net/page" not in urls


async def test_a_streamed_online_call_is_refused(autojump_clock):
    async with online_gateway(config(), FakeSearch()) as app:
        reply = await ask(app, stream=True)
    assert reply.status == 404
    error = reply.json()["error"]
    assert error["code"] == "unsupported_model_variant" and "buffered calls only" in error["message"]
    assert sent(app) == []


async def test_online_without_a_backend_that_takes_tools_is_refused(autojump_clock):
    text = config().replace("pricing: {input_tokens: 1000000, output_tokens: 1000000}",
                            "capabilities: [chat], pricing: {input_tokens: 1, output_tokens: 1}")
    async with online_gateway(text, FakeSearch()) as app:
        reply = await ask(app)
    assert reply.status == 404
    assert "lacks tool calling" in reply.json()["error"]["message"]
    assert sent(app) == []


async def test_online_without_web_search_is_refused(autojump_clock):
    text = config()
    text = text[:text.index("web_search:")]
    async with online_gateway(text, FakeSearch()) as app:
        reply = await ask(app)
    assert reply.status == 404
    assert "no web-search executor is configured" in reply.json()["error"]["message"]


async def test_the_response_cache_is_neither_read_nor_written(autojump_clock):
    cache = "response_cache: {enabled: true, ttl: 1h}\n"
    fake = FakeSearch()
    async with online_gateway(config(extra="") + cache, fake) as app:
        first = await ask(app, temperature=0)
        second = await ask(app, temperature=0)
        base = await request(app, "POST", "/v1/chat/completions", chat("demo", temperature=0))
    assert first.status == second.status == base.status == 200
    assert len(fake.seen) == 2                       # both :online calls searched
    assert len(sent(app)) == 5                       # and went upstream: two rounds each, then the base call
    assert first.headers.get(b"x-continuum-cache") in (None, b"bypass")
