"""The ``simulated`` web-search provider (``protocol/simulated/search.py``): results made from the query with no
request sent, cut to ``max_results``, kept or dropped by the domain rules, slowed or failing as its
``simulation`` says (MockClock)."""

import httpx
import pytest
import trio

from switchyard.actors.search.executor import search
from switchyard.actors.search.hits import Hit
from switchyard.config.web_search import SearchProvider, SearchSimulation, WebSearchConfig
from switchyard.protocol.search.client import ProviderSearch

SIMULATED = SearchProvider(name="sim", type="simulated")


def no_network(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"a simulated provider sent {request.method} {request.url}")


async def searched(*providers, query="What is Trio?", **limits):
    async with httpx.AsyncClient(transport=httpx.MockTransport(no_network)) as client:
        config = WebSearchConfig(providers=providers or (SIMULATED,), **limits)
        return await search(ProviderSearch(client), config, query, trio.current_time() + 60)


async def test_the_same_query_gets_the_same_three_results_quoting_it_on_reserved_domains():
    first, again = await searched(), await searched()
    assert first.hits == again.hits == [
        Hit("Overview: What is Trio?", "https://example.com/articles/what-is-trio",
            'A simulated article about "What is Trio?": what it is and why it matters.'),
        Hit("Reference: What is Trio?", "https://docs.example.org/reference/what-is-trio",
            'Simulated reference documentation for "What is Trio?", with definitions and examples.'),
        Hit("Discussion: What is Trio?", "https://forum.example.net/t/what-is-trio",
            'A simulated discussion thread where people ask about "What is Trio?".')]
    assert (first.provider, first.tried, first.errors) == (SIMULATED, ("sim",), ())
    assert [h.url for h in (await searched(query="?!")).hits][0] == "https://example.com/articles/search"


async def test_max_results_cuts_the_results():
    done = await searched(max_results=2)
    assert [h.url for h in done.hits] == ["https://example.com/articles/what-is-trio",
                                          "https://docs.example.org/reference/what-is-trio"]


@pytest.mark.parametrize("rules, kept", [
    ({"deny_domains": ("example.net",)}, ["example.com", "docs.example.org"]),
    ({"allow_domains": ("example.org",)}, ["docs.example.org"]),
])
async def test_the_domain_rules_drop_results_as_for_any_provider(rules, kept):
    done = await searched(**rules)
    assert [httpx.URL(h.url).host for h in done.hits] == kept
    assert done.dropped == 3 - len(kept)


async def test_a_slow_or_failing_simulation_hands_the_search_to_the_next_provider(autojump_clock):
    slow = SearchProvider(name="slow", type="simulated", simulation=SearchSimulation(latency=10.0))
    failing = SearchProvider(name="failing", type="simulated", simulation=SearchSimulation(fail=True))
    began = trio.current_time()
    done = await searched(slow, failing, SIMULATED, timeout=2.0)
    assert (done.provider, done.tried) == (SIMULATED, ("slow", "failing", "sim"))
    assert done.errors == ("slow: no answer within 2s", "failing: failed as its simulation says (simulation.fail)")
    assert len(done.hits) == 3 and trio.current_time() - began == 2.0
