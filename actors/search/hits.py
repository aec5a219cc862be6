"""One search result as the loop keeps it, the port that fetches results, and the domain rules.

A provider's answer is read into ``Hit`` values by its client below the wire
(``protocol/search/``); ``SearchFailed`` is the one failure a client raises
(an error status, an answer that is not the provider's JSON, the transport's
failure), so the executor hands the search to the next provider. ``allowed``
is the operator's ``allow_domains`` / ``deny_domains``: a result's host
matches a listed domain when it is that domain or one of its subdomains.
"""

from __future__ import annotations

from typing import Protocol, Sequence
from urllib.parse import urlsplit

from attrs import frozen

from switchyard.config.web_search import SearchProvider


@frozen
class Hit:
    title: str
    url: str
    snippet: str


class SearchFailed(Exception):
    """A provider gave no usable answer; the message says why (never its key)."""


class SearchApi(Protocol):
    """The providers' clients (``protocol/search/``)."""

    async def search(self, provider: SearchProvider, query: str, count: int) -> list[Hit]:
        """At most ``count`` results for ``query`` from ``provider``, or SearchFailed. No time limit of its
        own: the executor's cancel scope bounds it."""
        ...


def host_of(url: str) -> str | None:
    """The lower-case host of an http(s) URL, or None for anything else (never injected)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.hostname.rstrip(".").lower()


def _within(host: str, domains: Sequence[str]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


def allowed(url: str, allow: Sequence[str], deny: Sequence[str]) -> bool:
    """Whether a result at ``url`` may be fed to the model: an http(s) URL, inside ``allow`` when it names
    any domain, and outside ``deny``."""
    host = host_of(url)
    if host is None:
        return False
    if allow and not _within(host, allow):
        return False
    return not _within(host, deny)
