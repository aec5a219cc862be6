"""What the model is told of a search, and how the answer's use of a source is found.

Sources are numbered across the whole call (a URL found twice keeps its
first number), so an ``[n]`` in the final answer names one source whatever
round found it. A search's tool result lists its sources, each with its
number, title, URL and snippet, cut to ``max_injected_chars`` characters: a
source that does not fit whole is cut at the snippet, and those past the cap
are not numbered at all (the model never saw them, it cannot cite them).

The answer's citations: every ``[n]`` marker naming a source the model was
given, and every source URL the answer quotes as text, each becomes an
OpenAI ``url_citation`` annotation whose ``start_index`` / ``end_index``
are character offsets of that marker or URL in the message's content. A
source neither marked nor quoted is not cited. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

from switchyard.actors.search.hits import Hit

_MARKER = re.compile(r"\[(\d{1,4})\]")
_CUT = "..."


class Sources:
    """The sources one call's searches fed the model, by number."""

    def __init__(self) -> None:
        self.by_number: dict[int, Hit] = {}
        self._numbers: dict[str, int] = {}

    def number(self, hit: Hit) -> int:
        n = self._numbers.get(hit.url)
        if n is None:
            n = self._numbers[hit.url] = len(self._numbers) + 1
            self.by_number[n] = hit
        return n

    def render(self, query: str, hits: list[Hit], cap: int) -> str:
        """The tool result for one search: its numbered sources, at most ``cap`` characters."""
        if not hits:
            return f'No results for "{query}".'
        text = f'Search results for "{query}" (cite a source as [n]):'
        for hit in hits:
            known = self._numbers.get(hit.url)
            head = f"\n\n[{known or len(self._numbers) + 1}] {hit.title}\nURL: {hit.url}\n"
            room = cap - len(text) - len(head)
            if room <= 0:
                break
            snippet = hit.snippet if len(hit.snippet) <= room else hit.snippet[:max(0, room - len(_CUT))] + _CUT
            self.number(hit)
            text += head + snippet
            if snippet is not hit.snippet:
                break
        return text[:cap]


def citations(content: str, sources: Sources) -> list[dict[str, Any]]:
    """The ``url_citation`` annotations of ``content`` (see the module's docstring), in text order."""
    found: list[tuple[int, int, Hit]] = []
    for match in _MARKER.finditer(content):
        hit = sources.by_number.get(int(match.group(1)))
        if hit is not None:
            found.append((match.start(), match.end(), hit))
    for hit in sources.by_number.values():
        start = content.find(hit.url)
        while start >= 0:
            end = start + len(hit.url)
            if not any(s <= start < e for s, e, _ in found):
                found.append((start, end, hit))
            start = content.find(hit.url, end)
    found.sort(key=lambda f: f[0])
    return [{"type": "url_citation", "url_citation": {"url": hit.url, "title": hit.title, "start_index": start,
                                                      "end_index": end}} for start, end, hit in found]


def with_citations(answer: dict[str, Any], sources: Sources) -> dict[str, Any]:
    """``answer`` with each choice's message annotated for the sources its text used (its own kept first)."""
    choices = []
    for choice in answer.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(message, dict) and isinstance(content, str) and sources.by_number:
            cited = citations(content, sources)
            if cited:
                own = message.get("annotations")
                message = {**message, "annotations": [*(own if isinstance(own, list) else ()), *cited]}
                choice = {**choice, "message": message}
        choices.append(choice)
    return {**answer, "choices": choices}
