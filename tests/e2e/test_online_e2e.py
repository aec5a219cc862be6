"""End-to-end: ``:online`` through the official openai SDK on a real socket, its searches sent to fake
SearXNG, Brave and Tavily servers on loopback ports: the answer with its url_citation annotations, provider
failover over real HTTP, and the ledger's records of the call under one request id."""

from __future__ import annotations

from typing import Any

import openai
import pytest
import trio

from switchyard.actors.ledger.record import UsageQuery
from tests.e2e.support import backend, gateway_config, in_thread
from tests.search_fakes import KEYS, FakeSearch
from tests.servers import serving

pytestmark = pytest.mark.simulator_history


async def test_online_through_the_sdk_with_failover_between_real_providers(start_gateway, monkeypatch):
    monkeypatch.setenv("BRAVE_KEY", KEYS["brave"])
    monkeypatch.setenv("TAVILY_KEY", KEYS["tavily"])
    fake = FakeSearch()
    fake.modes["searxng"] = "502"     # the first provider fails: the search goes on to Brave
    async with serving(fake) as url:
        ends = fake.endpoints(url)
        model = backend("a", call_tools=True, text="Trio is async [1].")
        model["model_configs"] = [{"id": "demo", "metadata": {"pricing": {"input_tokens": 1, "output_tokens": 2}}}]
        gw = await start_gateway(gateway_config(
            model, proxy={"variant_suffixes": {"enabled": True}}, usage={"ledger": "memory"},
            web_search={"providers": [
                {"name": "searx", "type": "searxng", "endpoint": ends["searxng"]},
                {"name": "brave", "type": "brave", "endpoint": ends["brave"], "api_key": "${BRAVE_KEY}",
                 "cost_per_search": 0.005},
                {"name": "tavily", "type": "tavily", "endpoint": ends["tavily"], "api_key": "${TAVILY_KEY}"}],
                "timeout": "5s"}))
        client = openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)
        with client:
            def online() -> Any:
                return client.chat.completions.with_raw_response.create(
                    model="demo:online", messages=[{"role": "user", "content": "what is trio?"}])

            raw = await in_thread(online)
    answer = raw.parse()
    assert answer.model == "demo:online"
    assert raw.headers["x-continuum-model-variant"] == "online"
    [citation] = answer.choices[0].message.annotations
    assert citation.type == "url_citation"
    assert (citation.url_citation.url, citation.url_citation.title) == ("https://trio.readthedocs.io/en/stable/",
                                                                        "Trio docs")
    assert (citation.url_citation.start_index, citation.url_citation.end_index) == (14, 17)
    assert fake.seen == [("searxng", "what is trio?"), ("brave", "what is trio?")]
    runtime = gw.app.runtime
    with trio.fail_after(5):   # the call is recorded once its answer went out: after the client read it
        while not [r for r in runtime.ledger.store.records(UsageQuery(purpose=None), 100) if r.purpose == "client"]:
            await runtime.ledger.flush()
            await trio.sleep(0.01)
    rows = runtime.ledger.store.records(UsageQuery(purpose=None), 100)
    request_id = raw.headers["x-continuum-request-id"]
    assert {r.request_id for r in rows} == {request_id}
    [call] = [r for r in rows if r.purpose == "client"]
    [search] = [r for r in rows if r.purpose == "web_search"]
    assert call.attempts == 2 and call.cost is not None and call.cost > 0
    assert (search.backend, search.attempts, search.cost) == ("brave", 2, 0.005)
