"""The ``:online`` loop's view of its call's RequestActor (``actors/search/loop.py``'s ``Rounds``).

A round runs the actor's own route loop (``RequestActor.run_attempts``: attempts,
retries, fallback, route events, the meter) with the round's body and a sink
that keeps the answer instead of sending it; the client's sink and relay are
put back whatever happens, so a round's failure ends the call as any
failure does. A search is a route event and a ledger record of its own.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from switchyard.actors.budgets import CallBudget
from switchyard.actors.ledger.entries import search_record
from switchyard.actors.relay import Relay
from switchyard.actors.search.executor import Searched
from switchyard.actors.search.loop import Kept


class Rounds:
    __slots__ = ("actor",)

    def __init__(self, actor: Any) -> None:
        self.actor = actor   # the RequestActor (not named: request.py imports this module)

    @property
    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = self.actor.call.payload
        return payload

    async def model_round(self, payload: dict[str, Any], budget: CallBudget) -> Kept:
        """One model round: ``payload`` routed as the call is, on its budget and meter, its answer kept."""
        actor = self.actor
        client, relay = actor.sink, actor.relay
        kept = Kept()
        actor.call = attrs.evolve(actor.call, payload=payload, body=json.dumps(payload).encode())
        actor.sink = kept
        actor.relay = Relay(kept, None, relay.empty_reply_is_failure, relay.answer_limit)
        actor.relay.meter = actor.meter
        try:
            await actor.run_attempts(budget)
        finally:
            actor.sink, actor.relay = client, relay
        return kept

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

    async def answer_client(self, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """The loop's answer, to the client (through the relay's first-byte sink: the call's TTFB)."""
        sink = self.actor.relay.sink
        await sink.start(200, headers)
        await sink.send(body)
        await sink.finish()
