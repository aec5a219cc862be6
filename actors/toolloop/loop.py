"""The tool loop: model rounds and the gateway's own tool calls between them, inside the call's one budget.

It serves ``:online``'s ``web_search`` (``actors/search/``) and the MCP tools a
call names (``actors/mcp/toolbox.py``) alike: each is a ``Toolbox`` whose
tools are offered to the model as function tools. Each round is the call's
body in its API's shape (a ``Dialect``: chat or Responses) with those tools
beside the client's own, routed like any attempt of the call (its route
events, retries and fallback; its tokens priced on the call's meter), its
answer kept rather than sent. A round whose answer calls only the gateway's
tools has them run (each toolbox its own, side by side) and their results
appended, and the next round goes; a round that answers, or that calls a
client tool, ends the loop: the answer goes to the client with the gateway's
calls taken out and each toolbox's finish applied (citations, ``mcp_call``
items). The last round is offered none of the gateway's tools, so it has to
answer. Every round and every tool call runs under the call's budget.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Protocol, Sequence

import trio
from attrs import define, field, frozen

from switchyard.actors.budgets import CallBudget
from switchyard.actors.errors import InvalidRequest, UpstreamProtocolError


@frozen
class Function:
    """A function tool the gateway offers the model."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@frozen
class ToolCall:
    """A function call the model made: its id (chat ``id``, Responses ``call_id``), name, JSON arguments."""

    id: str
    name: str
    arguments: str


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
    """What the loop needs of the call's RequestActor (``actors/call/tool_rounds.py``)."""

    @property
    def payload(self) -> dict[str, Any]: ...

    async def model_round(self, payload: dict[str, Any], budget: CallBudget) -> Kept: ...

    async def answer_client(self, headers: list[tuple[bytes, bytes]], body: bytes) -> None: ...


class Toolbox(Protocol):
    """Tools the gateway runs for the model on one call."""

    label: str   # what the tools are, for a refusal: "the gateway's search tool on :online calls"

    def offered(self) -> Sequence[Function]: ...

    def owns(self, name: str) -> bool: ...

    async def run(self, calls: list[ToolCall], budget: CallBudget) -> list[str]:
        """Each call's result text, in call order; a failure is a result that says so, never raised."""
        ...

    def finish(self, answer: dict[str, Any]) -> dict[str, Any]:
        """The final answer as the client gets it (the gateway's calls already taken out)."""
        ...


class Dialect(Protocol):
    """The shapes of one API's bodies and answers (``chat.py``, ``responses.py``). Pure."""

    def client_tools(self, payload: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(field path, name) of each function tool the client offers itself."""
        ...

    def round_body(self, payload: dict[str, Any], added: list[dict[str, Any]],
                   offered: Sequence[Function]) -> dict[str, Any]: ...

    def calls(self, answer: Any) -> list[ToolCall] | None:
        """The function calls the answer makes, in order; None when it is no answer of this API."""
        ...

    def exchange(self, answer: dict[str, Any], results: list[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
        """What a round adds to the conversation: the model's calls, then each one's result."""
        ...

    def without(self, answer: dict[str, Any], owned: Callable[[str], bool]) -> dict[str, Any]:
        """``answer`` with the calls of ``owned`` names taken out: the client has no result to give for them."""
        ...


async def run(rounds: Rounds, dialect: Dialect, boxes: Sequence[Toolbox], max_rounds: int,
              budget: CallBudget) -> None:
    """Serve the call through the loop (see the module's docstring); a round's failure is raised."""
    payload = rounds.payload

    def owner(name: str) -> Toolbox | None:
        return next((box for box in boxes if box.owns(name)), None)

    for path, name in dialect.client_tools(payload):
        box = owner(name)
        if box is not None:
            raise InvalidRequest(f"'{name}' is the name of {box.label}; name the client's own tool otherwise",
                                 param=path)
    offered = [function for box in boxes for function in box.offered()]
    added: list[dict[str, Any]] = []
    for number in range(1, max_rounds + 1):
        last = number == max_rounds
        kept = await rounds.model_round(dialect.round_body(payload, added, () if last else offered), budget)
        try:
            answer = kept.json()
        except ValueError:
            raise UpstreamProtocolError("A round of the gateway's tool loop answered with a body that is not "
                                        "JSON") from None
        calls = dialect.calls(answer)
        if last or not calls or any(owner(c.name) is None for c in calls):
            break
        results = await _run(boxes, owner, calls, budget)
        added += dialect.exchange(answer, results)
    final = answer
    if isinstance(answer, dict):
        final = dialect.without(answer, lambda name: owner(name) is not None)
        for box in boxes:
            final = box.finish(final)
    await rounds.answer_client(kept.headers, json.dumps(final).encode())


async def _run(boxes: Sequence[Toolbox], owner: Callable[[str], Toolbox | None], calls: list[ToolCall],
               budget: CallBudget) -> list[tuple[ToolCall, str]]:
    """Each call's result, in call order: every toolbox runs its own calls, the toolboxes side by side."""
    texts: dict[int, str] = {}

    async def one(box: Toolbox, mine: list[int]) -> None:
        for i, text in zip(mine, await box.run([calls[i] for i in mine], budget), strict=True):
            texts[i] = text

    async with trio.open_nursery() as nursery:
        for box in boxes:
            mine = [i for i, call in enumerate(calls) if owner(call.name) is box]
            if mine:
                nursery.start_soon(one, box, mine)
    return [(call, texts[i]) for i, call in enumerate(calls)]
