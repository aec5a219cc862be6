"""One search the model asked for: the providers tried in order, each within ``web_search.timeout`` and
what is left of the call's budget, until one answers.

A provider that fails (no answer in time, an error status, an answer that
is not its JSON) hands the search to the next; when every one failed the
model is told so in the tool result, and the call goes on to answer within
its budget. Results outside the domain rules are dropped before anything is
fed back. Each search is one ledger record (``purpose: web_search``) under
the call's request id: the provider that answered (or the last one tried)
as its backend, its ``cost_per_search`` as its cost.
"""

from __future__ import annotations

import logging

import trio
from attrs import frozen

from switchyard.actors.search.hits import Hit, SearchApi, SearchFailed, allowed
from switchyard.config.web_search import SearchProvider, WebSearchConfig

log = logging.getLogger("switchyard.search")
QUERY_LIMIT = 400   # characters of a query sent to a provider


@frozen
class Searched:
    """What one search came to."""

    query: str
    hits: list[Hit]
    provider: SearchProvider | None      # the one that answered; None: none did
    tried: tuple[str, ...]               # providers tried, in order
    errors: tuple[str, ...]              # why each one before (or all, when none answered) failed
    dropped: int = 0                     # results the domain rules left out
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.provider is None

    def failure_text(self) -> str:
        """The tool result when no provider answered: what the model is told to do without results."""
        return (f'web_search failed for "{self.query}": no search provider answered ({"; ".join(self.errors)}). '
                f"Answer without search results, and say that the web search failed.")


async def search(api: SearchApi, config: WebSearchConfig, query: str, deadline: float) -> Searched:
    """``query`` asked of each provider in turn, none past ``deadline`` (the call's budget)."""
    query = query[:QUERY_LIMIT]
    began = trio.current_time()
    tried: list[str] = []
    errors: list[str] = []
    for provider in config.providers:
        if trio.current_time() >= deadline:
            errors.append("the call's time budget ran out")
            break
        tried.append(provider.name)
        hits: list[Hit] | None = None
        with trio.move_on_at(min(trio.current_time() + config.timeout, deadline)):
            try:
                hits = await api.search(provider, query, config.max_results)
            except SearchFailed as exc:
                errors.append(f"{provider.name}: {exc}")
                continue
        if hits is None:
            errors.append(f"{provider.name}: no answer within {config.timeout:g}s")
            continue
        kept = [h for h in hits if allowed(h.url, config.allow_domains, config.deny_domains)][:config.max_results]
        return Searched(query, kept, provider, tuple(tried), tuple(errors), len(hits) - len(kept),
                        trio.current_time() - began)
    log.warning("web search failed on every provider: %s", "; ".join(errors))
    return Searched(query, [], None, tuple(tried), tuple(errors), seconds=trio.current_time() - began)

