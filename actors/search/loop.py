"""The ``:online`` loop: model rounds and the searches between them, inside the call's one budget.

Each round is the call's body with ``web_search`` offered beside the client's
own tools (``tool.py``), routed like any attempt of the call (its route
events, retries and fallback; its tokens priced on the call's meter), its
answer kept rather than sent. A round whose answer calls only ``web_search``
has its searches run (at most ``MAX_SEARCHES`` a round, side by side, each a
ledger record of its own) and their results appended, and the next round
goes; a round that answers, or that calls a client tool, ends the loop: the
answer goes to the client with the gateway's own calls taken out and its
citations annotated (``sources.py``). The last of ``web_search.max_rounds``
rounds is offered no ``web_search``, so it has to answer. Every round and
every search runs under the call's budget: nothing outlives it.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import trio
from attrs import define, field

from switchyard.actors.budgets import CallBudget
from switchyard.actors.errors import InvalidRequest, UpstreamProtocolError
from switchyard.actors.search import executor, tool
from switchyard.actors.search.hits import SearchApi
from switchyard.actors.search.sources import Sources, with_citations
from switchyard.config.web_search import WebSearchConfig

MAX_SEARCHES = 5   # web_search calls run in one round; more are answered "not run"


@define
class Kept:
    """A round's answer, kept instead of sent (a ``ResponseSink`` for the round's relay)."""

    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(factory=list)
    chunks: list[bytes] = field(factory=list)
    started: bool = False
    finished: bool = False

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status, self.headers, self.started = status, headers, True

    async def send(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    async def finish(self) -> None:
        self.finished = True

    async def fail(self, error: Any) -> None:   # never called: a round's failure is raised, not sent
        raise error

    def json(self) -> Any:
        return json.loads(b"".join(self.chunks))


class Rounds(Protocol):
    """What the loop needs of the call's RequestActor (``actors/call/request.py``)."""

    @property
    def payload(self) -> dict[str, Any]: ...

    async def model_round(self, payload: dict[str, Any], budget: CallBudget) -> Kept: ...

    def searched(self, done: executor.Searched) -> None: ...

    async def answer_client(self, headers: list[tuple[bytes, bytes]], body: bytes) -> None: ...


async def run(rounds: Rounds, config: WebSearchConfig, api: SearchApi, budget: CallBudget) -> None:
    """Serve the call through the loop (see the module's docstring); a round's failure is raised."""
    payload = rounds.payload
    clash = tool.clash(payload)
    if clash is not None:
        raise InvalidRequest(f"'{tool.NAME}' is the name of the gateway's search tool on :online calls; name the "
                             f"client's own tool otherwise", param=clash)
    sources, added = Sources(), list[dict[str, Any]]()
    for number in range(1, config.max_rounds + 1):
        last = number == config.max_rounds
        kept = await rounds.model_round(tool.round_body(payload, added, offer=not last), budget)
        try:
            answer = kept.json()
        except ValueError:
            raise UpstreamProtocolError("A round of the :online loop answered with a body that is not JSON") from None
        message = tool.message_of(answer)
        calls = tool.tool_calls(message) if message is not None else []
        if last or message is None or not tool.searches_only(calls):
            break
        results = await _searches(rounds, config, api, calls, budget, sources)
        added += tool.exchange(message, results)
    final = with_citations(tool.without_searches(answer), sources) if isinstance(answer, dict) else answer
    await rounds.answer_client(kept.headers, json.dumps(final).encode())


async def _searches(rounds: Rounds, config: WebSearchConfig, api: SearchApi, calls: list[tool.ToolCall],
                    budget: CallBudget, sources: Sources) -> list[tuple[tool.ToolCall, str]]:
    """Each call's tool result, in call order: the searches run side by side, their sources numbered in
    call order once all are back (the same numbers whatever finished first)."""
    done: list[executor.Searched | str | None] = [None] * len(calls)

    async def one(i: int, query: str) -> None:
        searched = await executor.search(api, config, query, budget.deadline)
        rounds.searched(searched)
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
    for call, result in zip(calls, done, strict=True):
        if isinstance(result, executor.Searched):
            text = result.failure_text() if result.failed else \
                sources.render(result.query, result.hits, config.max_injected_chars)
        else:
            text = result or ""
        out.append((call, text))
    return out
