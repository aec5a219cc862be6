"""Each search provider's wire format: the request one search is, and how its answer becomes ``Hit``s.

- ``searxng``: ``GET {endpoint}/search?q=...&format=json`` (the instance must
  allow the JSON format), no key; results in ``results[]`` with ``url``,
  ``title`` and ``content``; it takes no count, so the first ``count`` are kept.
- ``brave``: ``GET {endpoint}?q=...&count=N`` with ``X-Subscription-Token``;
  results in ``web.results[]`` with ``url``, ``title`` and ``description``
  (whose ``<strong>`` highlighting is taken out). No ``web`` at all: no results.
- ``tavily``: ``POST {endpoint}`` with ``{"query", "max_results"}`` and
  ``Authorization: Bearer <key>``; results in ``results[]`` with ``url``,
  ``title`` and ``content``.

An answer that is not that JSON is the provider's failure (``SearchFailed``),
never an empty result.
"""

from __future__ import annotations

import html
import re
from typing import Any

from attrs import frozen

from switchyard.actors.search.hits import Hit, SearchFailed
from switchyard.config.web_search import SearchProvider

TITLE_MAX = 300
SNIPPET_MAX = 2000
_TAG = re.compile(r"<[^>]{0,200}>")
_SPACE = re.compile(r"\s+")


@frozen
class Ask:
    """One search as an HTTP request."""

    method: str
    url: str
    params: dict[str, str]
    headers: dict[str, str]
    json: dict[str, Any] | None = None


def ask(provider: SearchProvider, query: str, count: int) -> Ask:
    accept = {"accept": "application/json"}
    if provider.type == "searxng":
        return Ask("GET", provider.url + "/search", {"q": query, "format": "json"}, accept)
    if provider.type == "brave":
        return Ask("GET", provider.url, {"q": query, "count": str(count)},
                   {**accept, "x-subscription-token": provider.api_key})
    return Ask("POST", provider.url, {}, {**accept, "authorization": f"Bearer {provider.api_key}"},
               {"query": query, "max_results": count})


def hits(provider: SearchProvider, answer: Any, count: int) -> list[Hit]:
    """The results of ``answer`` (the provider's parsed JSON), at most ``count``; SearchFailed when it is not
    the provider's documented shape."""
    if not isinstance(answer, dict):
        raise SearchFailed("answered with JSON that is not an object")
    if provider.type == "brave":
        web = answer.get("web")
        if web is None:   # Brave leaves out a result type it has nothing for
            return []
        results, text = web.get("results") if isinstance(web, dict) else None, "description"
        where = "web.results"
    else:
        results, text, where = answer.get("results"), "content", "results"
    if not isinstance(results, list):
        raise SearchFailed(f"answered without a {where} list")
    out = []
    for item in results:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        out.append(Hit(_text(item.get("title"), TITLE_MAX) or item["url"], item["url"],
                       _text(item.get(text), SNIPPET_MAX)))
        if len(out) == count:
            break
    return out


def _text(value: Any, limit: int) -> str:
    """Plain text of a provider's field: tags out, entities decoded, whitespace folded, at most ``limit``."""
    if not isinstance(value, str):
        return ""
    return _SPACE.sub(" ", html.unescape(_TAG.sub("", value))).strip()[:limit]
