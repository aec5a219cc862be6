"""The ``simulated`` web-search provider: results made from the query in the process itself, for the demo's
``:online`` and for tests, with no endpoint, key or network.

Every query gets the same three results, one on each of the documentation
domains RFC 2606 reserves (``example.com``, ``example.org``,
``example.net``), so ``allow_domains`` / ``deny_domains`` have something to
keep or drop; titles and snippets quote the query, and the URLs carry it as
a slug, so a citation can be traced to the search that found it. The first
``count`` are returned. ``simulation.latency`` delays each answer (virtual
time under MockClock); ``simulation.fail`` makes every search fail, so the
next provider is tried.
"""

from __future__ import annotations

import re

import trio

from switchyard.actors.search.hits import Hit, SearchFailed
from switchyard.config.web_search import SearchProvider, SearchSimulation

QUOTED_MAX = 120   # characters of the query a title or snippet quotes
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


async def simulated_search(provider: SearchProvider, query: str, count: int) -> list[Hit]:
    sim = provider.simulation or SearchSimulation()
    if sim.latency:
        await trio.sleep(sim.latency)
    if sim.fail:
        raise SearchFailed("failed as its simulation says (simulation.fail)")
    return results(query)[:count]


def results(query: str) -> list[Hit]:
    """The simulated results of ``query``: always the same three for the same query."""
    q = query.strip()[:QUOTED_MAX]
    slug = _NOT_SLUG.sub("-", q.lower()).strip("-")[:80] or "search"
    return [
        Hit(f"Overview: {q}", f"https://example.com/articles/{slug}",
            f'A simulated article about "{q}": what it is and why it matters.'),
        Hit(f"Reference: {q}", f"https://docs.example.org/reference/{slug}",
            f'Simulated reference documentation for "{q}", with definitions and examples.'),
        Hit(f"Discussion: {q}", f"https://forum.example.net/t/{slug}",
            f'A simulated discussion thread where people ask about "{q}".'),
    ]
