"""The web-search executor behind the ``:online`` variant (``web_search``): its providers and its limits.

Providers are tried in file order for each search; one that fails (time
out, an error status, an answer that is not its documented JSON) hands the
search to the next. ``searxng`` is a self-hosted instance's JSON API (no key,
its ``endpoint`` required); ``brave`` and ``tavily`` are the commercial APIs,
each with its public endpoint by default and its key required (write it as
``${ENV}``: the file keeps no secret); ``simulated`` answers from the process
itself (no endpoint, no key, no network: for demos and tests, as simulated
backends are), slowed or failing as its ``simulation`` says. What a search
brings back is cut to ``max_results`` results and ``max_injected_chars``
characters, and results outside ``allow_domains`` or inside ``deny_domains``
are dropped before the model sees them. A ``web_search`` section that names
no provider is a load error: ``:online`` would otherwise be refused at every
call for a reason the operator wrote.
"""

from __future__ import annotations

import re
from typing import Any

from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field, load_section, section
from switchyard.config.rules import Invalid, Reader, child

TYPES = ("searxng", "brave", "tavily", "simulated")
# Each type's documented endpoint; searxng has none: it is always the operator's own instance.
PUBLIC_ENDPOINTS = {"brave": "https://api.search.brave.com/res/v1/web/search",
                    "tavily": "https://api.tavily.com/search"}
KEYED = frozenset({"brave", "tavily"})
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


def domain(value: Any) -> str:
    """A host name (``example.com``): lower-cased, no scheme, path, port or wildcard; it matches itself and
    its subdomains."""
    text = rules.string()(value).strip().lower().rstrip(".")
    labels = text.split(".")
    if "://" in text or not all(_LABEL.fullmatch(label) for label in labels):
        raise Invalid(f"must be a domain name like example.com (it matches its subdomains too), got {value!r}")
    return text


@frozen
class SearchSimulation:
    """What a ``simulated`` provider does besides answering at once (``protocol/simulated/search.py``)."""

    latency: float = field(0.0, rules.duration(maximum=3600, allow_zero=True))   # before each answer
    fail: bool = field(False, rules.boolean)   # every search fails (the next provider is tried)


@frozen
class SearchProvider:
    """One search API: what it is, where, its key, and what one search costs."""

    name: str = field("", rules.string(_NAME, "a name of letters, digits, '.', '_' or '-' (at most 64)"))
    type: str = field("searxng", values.words(*TYPES))
    endpoint: str = field("", values.http_url)     # empty: the type's public endpoint
    api_key: str = field("", rules.any_string, secret=True)
    cost_per_search: float | None = field(None, rules.number(0, 1000))   # USD, on each search's ledger record
    simulation: SearchSimulation | None = section(SearchSimulation, optional=True)   # type simulated only

    @property
    def url(self) -> str:
        return self.endpoint or PUBLIC_ENDPOINTS.get(self.type, "")


@frozen
class WebSearchConfig:
    providers: tuple[SearchProvider, ...] = ()
    max_results: int = field(5, rules.integer(1, 20))              # results kept from one search
    timeout: float = field(5.0, rules.duration(minimum=0.001, maximum=120))   # one provider's try at one search
    max_injected_chars: int = field(4000, rules.integer(200, 100_000))   # the tool result fed back, per search
    allow_domains: tuple[str, ...] = field((), rules.string_list(domain))   # empty: any domain
    deny_domains: tuple[str, ...] = field((), rules.string_list(domain))
    max_rounds: int = field(3, rules.integer(2, 10))   # model rounds of one call; the last one is offered no tool


def _provider_rules(p: SearchProvider, r: Reader) -> None:
    if not r.has("name"):
        r.problems.error(child(r.path, "name"), "is required")
    if p.type == "searxng" and not p.endpoint:
        r.problems.error(child(r.path, "endpoint"), "is required for type searxng (the instance's base URL)")
    if p.type in KEYED and not p.api_key:
        r.problems.error(child(r.path, "api_key"), f"is required for type {p.type} (write it as ${{ENV_VAR}})")
    if p.type == "searxng" and p.api_key:
        r.problems.error(child(r.path, "api_key"), "a searxng instance takes no key")
    if p.type == "simulated":
        for key in ("endpoint", "api_key"):
            if r.has(key):
                r.problems.error(child(r.path, key), "a simulated provider takes none (it answers from the "
                                                     "process itself)")
    elif p.simulation is not None:
        r.problems.error(child(r.path, "simulation"), f"is for type simulated only, not {p.type}")


def _section_rules(config: WebSearchConfig, r: Reader) -> None:
    if not config.providers:
        r.problems.error(child(r.path, "providers"), "must name at least one search provider (searxng, brave, "
                                                     "tavily or simulated); drop web_search to refuse :online instead")
    names = [p.name for p in config.providers]
    for i, name in enumerate(names):
        if name and name in names[:i]:
            r.problems.error(child(child(child(r.path, "providers"), i), "name"), f"{name!r} is named twice")
    both = sorted(set(config.allow_domains) & set(config.deny_domains))
    if both:
        r.problems.error(child(r.path, "deny_domains"), f"also in allow_domains: {', '.join(both)}")


def web_search(top: Reader) -> WebSearchConfig | None:
    """``web_search``, or None when the file has none (``:online`` is then refused)."""
    if "web_search" not in top.raw:
        top.section("web_search")   # marked as read
        return None
    r = top.section("web_search")
    providers = tuple(load_section(SearchProvider, item, _provider_rules) for item in r.items("providers"))
    return load_section(WebSearchConfig, r, _section_rules, providers=providers)
