"""The gateway's tool loop on its call's RequestActor (``actors/toolloop/loop.py``'s ``Rounds``), and the
toolboxes a call is served with: ``:online``'s ``web_search``, the MCP servers its ``tools`` name.

A round runs the actor's own route loop (``RequestActor.run_attempts``: attempts,
retries, fallback, route events, the meter) with the round's body and a sink
that keeps the answer instead of sending it; the client's sink and relay are
put back whatever happens, so a round's failure ends the call as any
failure does. A search and an MCP tool call are each a route event and a
ledger record of their own.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import attrs

from switchyard.actors.budgets import CallBudget
from switchyard.actors.ledger.entries import search_record
from switchyard.actors.ledger.pricing import decimal_text
from switchyard.actors.mcp import entries
from switchyard.actors.mcp.records import Caller
from switchyard.actors.mcp.toolbox import McpTools, Ran
from switchyard.actors.relay import COST_HEADER, Relay
from switchyard.actors.routing import variants
from switchyard.actors.search.executor import Searched
from switchyard.actors.search.loop import WebSearch
from switchyard.actors.toolloop import loop
from switchyard.actors.toolloop.chat import Chat
from switchyard.actors.toolloop.responses import Responses
from switchyard.actors.trace import new_span_id
from switchyard.config.endpoints import Endpoint


class Rounds:
    __slots__ = ("actor",)

    def __init__(self, actor: Any) -> None:
        self.actor = actor   # the RequestActor (not named: request.py imports this module)

    @property
    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = self.actor.call.payload
        return payload

    async def model_round(self, payload: dict[str, Any], budget: CallBudget) -> loop.Kept:
        """One model round: ``payload`` routed as the call is, on its budget and meter, its answer kept."""
        actor = self.actor
        client, relay = actor.sink, actor.relay
        kept = loop.Kept()
        actor.call = attrs.evolve(actor.call, payload=payload, body=json.dumps(payload).encode())
        actor.sink = kept
        actor.relay = Relay(kept, None, relay.empty_reply_is_failure, relay.answer_limit)
        actor.relay.meter = actor.meter
        try:
            await actor.run_attempts(budget)
        finally:
            actor.sink, actor.relay = client, relay
        return kept

    async def answer_client(self, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """The loop's answer, to the client (through the relay's first-byte sink: the call's TTFB), its
        ``x-continuum-cost`` the whole call's: the model rounds' and the searches'."""
        sink = self.actor.relay.sink
        await sink.start(200, with_searches(headers, self.actor.search_cost))
        await sink.send(body)
        await sink.finish()

    def searched(self, done: Searched) -> None:
        """A search of the loop ran: its route event and its own ledger record."""
        actor, p = self.actor, done.provider
        actor.trace.add("web_searched", backend=p.name if p is not None else None, tried=list(done.tried),
                        results=len(done.hits), dropped=done.dropped, failed=done.failed,
                        **({"errors": list(done.errors)} if done.errors else {}))
        cost = p.cost_per_search if p is not None else None
        actor.search_cost += cost or 0.0
        actor.runtime.ledger.record(search_record(
            actor.trace, key=actor.call.key, model=actor.call.model,
            provider=p.name if p is not None else (done.tried[-1] if done.tried else None), tried=len(done.tried),
            failed=done.failed, cost=cost, seconds=done.seconds))

    def tool_ran(self, ran: Ran) -> None:
        """An MCP tool call of the loop ended (its ledger record is ``ToolCalls``'): its route event."""
        self.actor.trace.add("mcp_tool_called", backend=ran.server, tool=ran.tool, failed=ran.error is not None)


def with_searches(headers: list[tuple[bytes, bytes]], search_cost: float) -> list[tuple[bytes, bytes]]:
    """``headers`` with the searches' cost added to the model rounds' ``x-continuum-cost`` (set to it when no
    priced model was involved)."""
    if not search_cost:
        return headers
    rounds = next((Decimal(v.decode()) for k, v in headers if k == COST_HEADER), Decimal(0))
    total = decimal_text(rounds + Decimal(repr(search_cost)))
    return [*(h for h in headers if h[0] != COST_HEADER), (COST_HEADER, total.encode())]


async def serve(actor: Any, budget: CallBudget) -> bool:
    """Serve the call through the tool loop when it has tools the gateway runs (True), else nothing (False)."""
    rt, call = actor.runtime, actor.call
    config = call.snapshot.web_search
    online = actor.variant is not None and actor.variant.variant == variants.ONLINE \
        and config is not None and rt.search is not None   # admitted: refused otherwise
    if not online and not entries.named(call.payload):
        return False
    rounds, boxes, max_rounds = Rounds(actor), list[loop.Toolbox](), 0
    if online:
        assert config is not None and rt.search is not None
        boxes.append(WebSearch(config, rt.search, rounds.searched))
        max_rounds = config.max_rounds
    uses = entries.uses(call.payload, call.snapshot.mcp_servers, call.stream)   # checked at the door
    if uses:
        if call.trace is not None and actor.trace.trace_id is not None:   # the tool calls' spans are the call's
            actor.trace.span_id = actor.trace.span_id or new_span_id()
        caller = Caller(call.request_id, call.key, call.client_ip, call.trace, call.tool_headers,
                        actor.trace.span_id)
        settings = call.snapshot.mcp_tools
        boxes.append(await McpTools.open(rt.tool_calls, caller, uses, settings.max_calls_per_round,
                                         call.payload.get("tools"), call.endpoint == Endpoint.RESPONSES,
                                         rounds.tool_ran, budget))
        max_rounds = max(max_rounds, settings.max_rounds)
    dialect: loop.Dialect = Responses() if call.endpoint == Endpoint.RESPONSES else Chat()
    await loop.run(rounds, dialect, boxes, max_rounds, budget)
    return True
