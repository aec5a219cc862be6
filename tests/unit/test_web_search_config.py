"""The ``web_search`` section (``config/web_search.py``): defaults, each provider type's rules, the section's
rules, every error at its field path."""

import pytest

from switchyard.config.load import ConfigError, load_text

MINIMAL = """
backends:
  - {name: sim, type: simulated, models: [demo]}
"""


def loaded(text, env=None):
    return load_text(MINIMAL + text, env=env or {}).snapshot.web_search


def errors(text, env=None):
    with pytest.raises(ConfigError) as info:
        load_text(MINIMAL + text, env=env or {})
    return info.value.errors


def test_no_section_is_none_and_a_minimal_one_takes_the_defaults():
    assert loaded("") is None
    config = loaded("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://127.0.0.1:8888/'}]}\n")
    assert (config.max_results, config.timeout, config.max_injected_chars, config.max_rounds) == (5, 5.0, 4000, 3)
    assert config.providers[0].url == "http://127.0.0.1:8888"
    assert config.allow_domains == config.deny_domains == ()


def test_commercial_providers_default_to_their_public_endpoint_and_read_the_key_from_the_environment():
    config = loaded("web_search:\n  providers:\n"
                    "    - {name: b, type: brave, api_key: '${BRAVE}', cost_per_search: 0.005}\n"
                    "    - {name: t, type: tavily, api_key: '${TAVILY}'}\n", env={"BRAVE": "bk", "TAVILY": "tk"})
    brave, tavily = config.providers
    assert (brave.url, brave.api_key, brave.cost_per_search) == ("https://api.search.brave.com/res/v1/web/search",
                                                                 "bk", 0.005)
    assert (tavily.url, tavily.api_key, tavily.cost_per_search) == ("https://api.tavily.com/search", "tk", None)
    assert "bk" not in repr(brave)


def test_a_simulated_provider_needs_no_endpoint_or_key_and_takes_its_simulation():
    plain, slow = loaded("web_search:\n  providers:\n    - {name: sim, type: simulated}\n"
                         "    - {name: slow, type: simulated, simulation: {latency: 150ms, fail: true}}\n").providers
    assert (plain.type, plain.url, plain.api_key, plain.simulation) == ("simulated", "", "", None)
    assert (slow.simulation.latency, slow.simulation.fail) == (0.15, True)


@pytest.mark.parametrize("text, expected", [
    ("web_search: {}\n", "web_search.providers: must name at least one search provider (searxng, brave, tavily or "
                         "simulated); drop web_search to refuse :online instead"),
    ("web_search: {providers: [{type: searxng, endpoint: 'http://s'}]}\n", "web_search.providers[0].name: is required"),
    ("web_search: {providers: [{name: s, type: searxng}]}\n",
     "web_search.providers[0].endpoint: is required for type searxng (the instance's base URL)"),
    ("web_search: {providers: [{name: b, type: brave}]}\n",
     "web_search.providers[0].api_key: is required for type brave (write it as ${ENV_VAR})"),
    ("web_search: {providers: [{name: t, type: tavily, api_key: '${MISSING}'}]}\n",
     "web_search.providers[0].api_key: environment variable MISSING is not set"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s', api_key: k}]}\n",
     "web_search.providers[0].api_key: a searxng instance takes no key"),
    ("web_search: {providers: [{name: g, type: google, endpoint: 'http://s'}]}\n",
     "web_search.providers[0].type: must be one of searxng, brave, tavily, simulated, got 'google'"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'ftp://s'}]}\n",
     "web_search.providers[0].endpoint: must be an http:// or https:// URL with a host, got 'ftp://s'"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s'}, "
     "{name: s, type: searxng, endpoint: 'http://t'}]}\n", "web_search.providers[1].name: 's' is named twice"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s'}], allow_domains: ['https://x.org']}\n",
     "web_search.allow_domains: item [0] must be a domain name like example.com (it matches its subdomains too), "
     "got 'https://x.org'"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s'}], allow_domains: [x.org], "
     "deny_domains: [X.org]}\n", "web_search.deny_domains: also in allow_domains: x.org"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s'}], max_rounds: 1}\n",
     "web_search.max_rounds: must be at least 2, got 1"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s'}], max_results: 21}\n",
     "web_search.max_results: must be at most 20, got 21"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s'}], max_injected_chars: 10}\n",
     "web_search.max_injected_chars: must be at least 200, got 10"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s', cost_per_search: -1}]}\n",
     "web_search.providers[0].cost_per_search: must be at least 0, got -1"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s'}], bogus: 1}\n",
     "web_search.bogus: unknown key"),
    ("web_search: {providers: [{name: s, type: simulated, endpoint: 'http://s'}]}\n",
     "web_search.providers[0].endpoint: a simulated provider takes none (it answers from the process itself)"),
    ("web_search: {providers: [{name: s, type: simulated, api_key: k}]}\n",
     "web_search.providers[0].api_key: a simulated provider takes none (it answers from the process itself)"),
    ("web_search: {providers: [{name: s, type: searxng, endpoint: 'http://s', simulation: {fail: true}}]}\n",
     "web_search.providers[0].simulation: is for type simulated only, not searxng"),
    ("web_search: {providers: [{name: s, type: simulated, simulation: {latency: -1s}}]}\n",
     "web_search.providers[0].simulation.latency: must be a duration like 10s, 500ms or 1m30s, got '-1s'"),
])
def test_a_bad_section_is_refused_at_its_field_path(text, expected):
    assert expected in errors(text)
