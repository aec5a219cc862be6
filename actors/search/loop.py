"""The ``:online`` loop's toolbox: ``web_search``, run against the ``web_search`` providers.

The rounds are the gateway's tool loop (``actors/toolloop/loop.py``, in chat
shapes); this box runs the searches a round asks for (at most
``MAX_SEARCHES``, side by side, each a ledger record of its own through
``searched``), numbers their sources across the call, and annotates the
final answer's citations (``sources.py``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import trio

from switchyard.actors.budgets import CallBudget
from switchyard.actors.search import executor, tool
from switchyard.actors.search.hits import SearchApi
from switchyard.actors.search.sources import Sources, with_citations
from switchyard.actors.toolloop.loop import Function, ToolCall
from switchyard.config.web_search import WebSearchConfig

MAX_SEARCHES = 5   # web_search calls run in one round; more are answered "not run"


class WebSearch:
    """The ``web_search`` tool of one ``:online`` call."""

    label = f"'{tool.NAME}', the gateway's search tool on :online calls"

    def __init__(self, config: WebSearchConfig, api: SearchApi, searched: Callable[[executor.Searched], None]
                 ) -> None:
        self.config, self.api, self.searched = config, api, searched
        self.sources = Sources()

    def offered(self) -> Sequence[Function]:
        return (tool.DEFINITION,)

    def owns(self, name: str) -> bool:
        return name == tool.NAME

    async def run(self, calls: list[ToolCall], budget: CallBudget) -> list[str]:
        """Each call's tool result, in call order: the searches run side by side, their sources numbered in
        call order once all are back (the same numbers whatever finished first)."""
        done: list[executor.Searched | str | None] = [None] * len(calls)

        async def one(i: int, query: str) -> None:
            searched = await executor.search(self.api, self.config, query, budget.deadline)
            self.searched(searched)
            done[i] = searched

        async with trio.open_nursery() as nursery:
            for i, call in enumerate(calls):
                query = tool.query_of(call)
                if i >= MAX_SEARCHES:
                    done[i] = f"web_search not run: at most {MAX_SEARCHES} searches are run in one round"
                elif query is None:
                    done[i] = "web_search needs a non-empty string argument 'query'"
                else:
                    nursery.start_soon(one, i, query)
        out = []
        for result in done:
            if isinstance(result, executor.Searched):
                out.append(result.failure_text() if result.failed else
                           self.sources.render(result.query, result.hits, self.config.max_injected_chars))
            else:
                out.append(result or "")
        return out

    def finish(self, answer: dict[str, Any]) -> dict[str, Any]:
        return with_citations(answer, self.sources)
