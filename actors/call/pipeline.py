"""One call from its parsed body to its answer: presets, provider preferences, parse, the guardrails'
input stage, smart routing, the RequestActor, admission, then dedup or a run of its own.

The protocol layer keeps what is HTTP (reading the body, authentication, the
sink's wire shape) and hands the rest in as values: the ``Arrival`` says who
called and on which revision, the ``Door`` how its ingress parses and
answers. Nothing here speaks HTTP, so every door runs the same pipeline.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

import attrs
import trio
from attrs import frozen

from switchyard.actors.call import limits
from switchyard.actors.call.request import RequestActor
from switchyard.actors.classifier import load_state
from switchyard.actors.dedup import Role, StreamingSink, dedup_key
from switchyard.actors.errors import GatewayError
from switchyard.actors.guardrails import stage as guardrails
from switchyard.actors.guardrails.output import guard
from switchyard.actors.ledger.counts import TokenCounts
from switchyard.actors.ledger.entries import call_record
from switchyard.actors.mcp import entries
from switchyard.actors.messages import Call
from switchyard.actors.params import apply_preset
from switchyard.actors.ports import CallMetrics, Limiter
from switchyard.actors.provider_prefs import parse_provider
from switchyard.actors.relay import ResponseSink
from switchyard.actors.timing import Timing
from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import Snapshot

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.actors.trace import TraceContext
    from switchyard.config.access import ApiKey
    from switchyard.config.limits import Organization


@frozen
class Arrival:
    """Who called, on which revision: what the ingress settled before the pipeline runs."""

    snapshot: Snapshot = attrs.field(repr=False)   # the revision the call runs on, its key judged by it
    key: "ApiKey | None"
    trace: "TraceContext | None"
    request_id: str
    route: str                                     # the client-facing route, a metric label
    headers: Mapping[bytes, bytes] = attrs.field(repr=False)
    in_flight: int = 0                             # calls open, this one included (smart routing's load)
    client_ip: str | None = None                   # set when rate_limiting.per_client_ip is
    hops: int = 0                                  # gateways passed before this one (actors/hops.py)
    client_address: Callable[[], str] | None = None   # without a key: the client's address, on demand (Call's)
    purpose: str = "client"                        # the ledger's; "batch" for a batch line (never a client's say)
    # The request's Server-Timing instants (App.http's); None: a websocket turn, timed from its call's start.
    timing: Timing | None = attrs.field(default=None, repr=False, eq=False)


@frozen
class Door:
    """The ingress's part: how its body becomes a Call, and the sink its answer goes to."""

    parse: Callable[..., Call]                     # (payload, body, snapshot, headers, request_id) -> Call
    sink_for: Callable[[Call], StreamingSink]
    endpoint: Endpoint = Endpoint.CHAT
    shape: Callable[[Call], Call] | None = None    # fixes the Call once parsed, before anything is decided


NOTHING = TokenCounts()


async def serve_call(runtime: "Runtime", arrival: Arrival, payload: dict[str, Any], body: bytes, door: Door,
                     disconnected: Callable[[], Awaitable[None]]) -> None:
    """One call in an OpenAI format (``payload``, parsed from ``body``), answered into ``door``'s sink."""
    snapshot = arrival.snapshot
    shaped = apply_preset(payload, snapshot.request_presets)
    prefs = None
    if snapshot.proxy.client_provider_preferences and "provider" in shaped:
        # Consumed here, so no backend ever sees it; an operator forwards one with
        # request_extensions.body.overrides.provider.
        if shaped["provider"] is not None:
            prefs = parse_provider(shaped["provider"])
        shaped = {k: v for k, v in shaped.items() if k != "provider"}
    if shaped is not payload:
        body = json.dumps(shaped).encode()
    headers = arrival.headers
    call = door.parse(shaped, body, snapshot, headers, arrival.request_id)
    call = attrs.evolve(call, trace=arrival.trace, key=arrival.key, prefs=prefs, endpoint=door.endpoint,
                        hops=arrival.hops, client_address=arrival.client_address, client_ip=arrival.client_ip)
    if door.shape is not None:
        call = door.shape(call)
    sink = door.sink_for(call)
    # None unless a guardrail's scope takes the call
    screen = guardrails.screen_for(runtime, RequestActor, call)
    if screen is not None:
        sink = guard(sink, screen, call)   # the output stage, on fresh answers and cache hits alike
        try:
            call = await screen.screen_input(call)   # the input stage: before anything reads the prompt
        except GatewayError as err:
            refused = _actor(runtime, call, arrival, screen)
            await refused.refuse(sink, err)
            return
    # Smart routing runs on /v1/chat/completions only (not behind the Messages door), as the spec says.
    if door.endpoint == Endpoint.CHAT and not call.ingress and runtime.smart.applies(call, headers):
        try:
            call = await runtime.smart.route(
                call, headers, load_state(arrival.in_flight, snapshot.server.max_concurrent_requests))
        except GatewayError as err:   # no candidate: refused like any call, with its route events
            refused = _actor(runtime, call, arrival, screen)
            await refused.refuse(sink, err)
            return
    actor = _actor(runtime, call, arrival, screen)
    try:
        actor.admit()
    except GatewayError as err:
        await actor.refuse(sink, err)
        return
    control = runtime.control.view   # the database's keys and organizations: their limits count too
    if (snapshot.limits_enabled or control.limited) and not await within_limits(
            runtime.limiter, runtime.metrics, actor, sink, arrival, control.organizations_over(snapshot.organizations)):
        return
    cached = await runtime.cache.lookup(actor, sink, headers)   # response_cache: a hit is answered here
    if cached.answered:
        return
    run = runtime.cache.recording(actor, cached)   # a miss stores its answer if it comes back clean
    nursery = runtime.nursery
    if call.snapshot.dedup.enabled and nursery is not None:
        await dispatch(runtime, actor, sink, disconnected, nursery, run)
    else:   # the common case, one frame shorter on every wake-up
        await run(sink, disconnected)


def _actor(runtime: "Runtime", call: Call, arrival: Arrival, screen: Any) -> RequestActor:
    """The call's RequestActor, its trace labelled with the client-facing route (a metric label: one of the
    fixed routes), its guardrail screen, and the request's timing."""
    actor = RequestActor(runtime, call, arrival.purpose)
    trace = actor.trace
    trace.route, trace.guardrails = arrival.route, screen
    trace.timing = arrival.timing if arrival.timing is not None else Timing(trace.started)
    return actor


async def within_limits(limiter: Limiter, metrics: CallMetrics | None, actor: RequestActor, sink: ResponseSink,
                        arrival: Arrival, organizations: "Mapping[str, Organization] | None" = None) -> bool:
    """Reserve the call's rate limits and budgets (one round trip to the limiter), or refuse it with its 429;
    an admitted call's answer carries its key's rate headers, and its ticket is settled when it ends.
    ``metrics`` hears how long the limiter took; ``organizations``: the config's and the database's."""
    demand = limits.demand_for(actor.call, actor.model, arrival.client_ip, organizations)
    if demand is None:
        return True
    began = trio.current_time()
    admission = await limiter.admit(demand)
    refusal = admission.refusal
    if metrics is not None:
        metrics.observe_admission(trio.current_time() - began, refusal)
    anthropic = arrival.route == limits.ANTHROPIC_ROUTE
    if refusal is not None:
        limits.log_refusal(refusal)
        await actor.refuse(sink, limits.refusal_error(refusal, admission, anthropic))
        return False
    actor.ticket = admission.ticket
    headers = limits.rate_headers(admission, anthropic)
    if headers:
        actor.call = attrs.evolve(actor.call, route_headers=(*actor.call.route_headers, *headers))
    return True


def _waits_on_flight(actor: RequestActor) -> Callable[[], None]:
    """What a follower does as it joins a flight: its wait on the flight's upstream call begins."""
    def following() -> None:
        if actor.trace.timing is not None:
            actor.trace.timing.dial(trio.current_time())
    return following


async def dispatch(runtime: "Runtime", actor: RequestActor, sink: StreamingSink,
                   disconnected: Callable[[], Awaitable[None]], nursery: trio.Nursery,
                   run: Callable[[ResponseSink, Callable[[], Awaitable[None]]], Awaitable[None]] | None = None) -> None:
    """Run the admitted call shared with identical calls in flight (``dedup`` is on); ``run`` is how the
    flight's lead runs it (``actor.run``, or the cache's recording of it)."""
    call = actor.call   # admitted: the body as dispatched
    # A call with provider preferences never shares: its preferences are gone from the body. Nor does one
    # whose tools the gateway runs on MCP servers: each call's tool calls are its own (they may act).
    shares = (call.prefs is None or call.prefs.empty) and not entries.named(call.payload)
    key = dedup_key(call, call.key.id if call.key is not None else None, actor.model) if shares else None
    try:
        served = await runtime.dedup.serve(key, sink, disconnected, run or actor.run, nursery,
                                           flight_id=call.request_id, following=_waits_on_flight(actor))
    except BaseException:
        # Cancelled from outside (a drain's end, say) before this call's actor ran: nothing else would
        # give its reservation back. An actor that runs (or ran) settles its own ticket when it ends.
        if actor.ticket is not None and actor not in runtime.calls:
            runtime.limiter.settle(actor.ticket, 0, None)
            actor.ticket = None
        raise
    if served.role is Role.FOLLOWED:   # this client's actor never ran: its trace says whose answer it got
        if actor.ticket is not None:   # it used nothing of its own
            runtime.limiter.settle(actor.ticket, 0, None)
        trace = actor.trace
        trace.add("deduplicated", leader_request_id=served.leader)
        if served.error is not None:
            trace.add("failed", status=served.error.status, code=served.error.code,
                      error=served.error.message, committed=sink.started)
        else:
            trace.add("completed" if served.delivered else "client_disconnected")
        runtime.traces.store(trace)
        # The follower's own record: it consumed nothing upstream (the leader's record has the spend).
        runtime.ledger.record(call_record(trace, key=call.key, model=call.model, stream=call.stream,
                                          counts=NOTHING, cost=None, estimated=False, served=(None, None),
                                          purpose=actor.purpose))
