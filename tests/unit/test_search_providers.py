"""Each search provider's client (``protocol/search/``) against a fake speaking its documented JSON: the
request it sends (path, query, key header) and how its answer becomes results; every failure one SearchFailed."""

import pytest

from switchyard.actors.search.hits import Hit, SearchFailed, allowed
from switchyard.config.web_search import SearchProvider
from switchyard.protocol.search.client import ProviderSearch
from tests.search_fakes import KEYS, FakeSearch

BASE = "http://search.test"


def provider(kind, key=None):
    return SearchProvider(name=kind, type=kind, endpoint=FakeSearch().endpoints(BASE)[kind],
                          api_key=KEYS.get(kind, "") if key is None else key)


@pytest.mark.parametrize("kind", ["searxng", "brave", "tavily"])
async def test_each_provider_is_asked_as_documented_and_read_into_results(kind):
    fake = FakeSearch()
    async with fake.client() as client:
        hits = await ProviderSearch(client).search(provider(kind), "trio nurseries", 2)
    assert fake.seen == [(kind, "trio nurseries")]
    assert hits == [Hit("Trio docs", "https://trio.readthedocs.io/en/stable/", "Trio is an async library"),
                    Hit("Switchyard", "https://docs.example.org/switchyard", "An LLM gateway & router")]


@pytest.mark.parametrize("kind", ["brave", "tavily"])
async def test_a_wrong_key_is_the_providers_failure(kind):
    async with FakeSearch().client() as client:
        with pytest.raises(SearchFailed, match="answered HTTP 401"):
            await ProviderSearch(client).search(provider(kind, key="wrong"), "q", 5)


@pytest.mark.parametrize("mode, why", [("500", "answered HTTP 500"), ("garbage", "a body that is not JSON"),
                                       ("wrong", "without a results list")])
async def test_an_answer_that_is_not_the_providers_json_fails_the_search(mode, why):
    fake = FakeSearch()
    fake.modes["tavily"] = mode
    async with fake.client() as client:
        with pytest.raises(SearchFailed, match=why):
            await ProviderSearch(client).search(provider("tavily"), "q", 5)


async def test_brave_without_web_results_is_no_results():
    fake = FakeSearch()
    fake.results = []
    async with fake.client() as client:
        assert await ProviderSearch(client).search(provider("brave"), "q", 5) == []


@pytest.mark.parametrize("url, allow, deny, ok", [
    ("https://docs.example.org/x", ("example.org",), (), True),      # a subdomain of an allowed domain
    ("https://badexample.org/x", ("example.org",), (), False),       # not a subdomain: another name
    ("https://example.org/x", (), ("example.org",), False),
    ("https://a.b.example.org/x", (), ("example.org",), False),
    ("https://EXAMPLE.org./x", ("example.org",), (), True),
    ("ftp://example.org/x", (), (), False),                          # never an URL the model cannot open
    ("not a url", (), (), False),
])
def test_domain_rules(url, allow, deny, ok):
    assert allowed(url, allow, deny) is ok
