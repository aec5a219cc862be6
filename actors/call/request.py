"""RequestActor: one per call. Plans routes, runs attempts under budgets, relays.

It runs in one cancel scope (its own nursery's only when a stream may need a
thinking decision timer), with a watcher on the client connection: when the
client goes away the scope is cancelled, which closes every upstream
connection of the call at once.

Before anything reaches the client, a failed attempt is classified and the
pure ``RoutePlan`` says what is next (retry, another backend, the next chain
model, or stop). A stream is committed to the client only when its first SSE
data event arrives, so a backend that sends headers and then nothing is
still a pre-stream failure. Once committed, a failure ends the stream with an
in-band error event and no ``[DONE]``: a truncated answer is never presented
as complete.

The actor coordinates; its parts are asked, not mixed in: admission
(``admission.py``: the call's reach and policy), route choice
(``route_choice.py``: what the model name and pin mean, each attempt's
backend), the attempt's body (``attempt_body.py``) and all it sends
(``outbound.py``), what is done with its answer and a fallback dial's
permit (``answering.py``), the relay's settings for it
(``actors/relay.py``), mid-stream recovery (``recovery.py``), and what an
attempt's end says about its backend (``verdicts.py``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import attrs
import httpx
import trio

from switchyard.actors import log_fields
from switchyard.actors.budgets import AttemptBudget, CallBudget, limits_for
from switchyard.actors.call import admission, attempt_body, quality_gate, stored_responses, tool_rounds
from switchyard.actors.call.answering import answer, fallback_permit
from switchyard.actors.call.attempt_body import NO_MESSAGES
from switchyard.actors.call.outbound import outbound
from switchyard.actors.call.quality_gate import QualityGate, gate_for
from switchyard.actors.call.recovery import Recovery, can_resume
from switchyard.actors.call.route_choice import RouteChoice, dispatch_model, resolve_variant, variant_refusal
from switchyard.actors.call.verdicts import backend_fault, failing_caller, our_failure
from switchyard.actors.errors import (
    GatewayError,
    ModelNotFound,
    NoHealthyBackend,
    PermissionDenied,
    ShuttingDown,
    UpstreamFailure,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeout,
)
from switchyard.actors.events import CallTrace, FirstByteSink
from switchyard.actors.ledger.entries import call_record
from switchyard.actors.ledger.meter import CallMeter
from switchyard.actors.ledger.record import BATCH
from switchyard.actors.limits.tickets import Ticket
from switchyard.actors.messages import Call
from switchyard.actors.relay import AttemptFailed, AttemptRelaySettings, Relay, ResponseSink, Transform
from switchyard.actors.rename import Rename
from switchyard.actors.routing import variants
from switchyard.actors.routing.dial_permits import permit_spans_answer
from switchyard.actors.routing.failover import Failure, Kind, MoveOn, Retry, RoutePlan
from switchyard.actors.routing.stream_state import StreamAccumulator
from switchyard.actors.stream_usage import without_option
from switchyard.config.endpoints import AUDIO, IMAGES, SCORING, Endpoint
from switchyard.config.schema import BackendConfig

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

log = logging.getLogger("switchyard.route")

# The client-facing route of another OpenAI endpoint's call (chat's is CallTrace's default).
OTHER_ROUTES = {Endpoint.COMPLETIONS: "/v1/completions", Endpoint.EMBEDDINGS: "/v1/embeddings",
                Endpoint.IMAGES_GENERATIONS: "/v1/images/generations", Endpoint.IMAGES_EDITS: "/v1/images/edits",
                Endpoint.IMAGES_VARIATIONS: "/v1/images/variations", Endpoint.RERANK: "/v1/rerank",
                Endpoint.MODERATIONS: "/v1/moderations",
                Endpoint.AUDIO_TRANSCRIPTIONS: "/v1/audio/transcriptions",
                Endpoint.AUDIO_TRANSLATIONS: "/v1/audio/translations", Endpoint.AUDIO_SPEECH: "/v1/audio/speech"}


class RequestActor:
    def __init__(self, runtime: "Runtime", call: Call, purpose: str = "client") -> None:
        """``purpose``: the ledger's (``batch``: a batch line, priced with its model's ``batch_discount``)."""
        self.runtime = runtime
        self.call = call
        self.attempts = 0
        tc = call.trace
        self.trace = CallTrace(call.request_id, call.snapshot.revision, trace_id=tc.trace_id if tc else None,
                               x_request_id=tc.x_request_id if tc else None, client_ref=tc.client_ref if tc else None,
                               parent_id=tc.parent_id if tc else None, flags=tc.flags if tc else None)
        self.trace.route = OTHER_ROUTES.get(call.endpoint, self.trace.route)   # the metrics' route label
        self._shut_down = False                       # the server's drain window ran out (shut_down)
        self._nursery: trio.Nursery | None = None     # a running stream's, for its thinking timer
        self._scope: trio.CancelScope | None = None   # the running call's, once it runs
        self.trace.add("accepted", model=call.model, stream=call.stream,
                       **({"endpoint": call.endpoint} if call.endpoint != Endpoint.CHAT else {}))
        if call.smart_route is not None:
            self.trace.add("smart_routed", **call.smart_route)
        # A `base:variant` name (proxy.variant_suffixes): the call is the base's, with a preference.
        self.variant = resolve_variant(runtime.discovery.view, call, self.trace)
        if self.variant is not None and self.variant.variant == variants.THINKING:
            self.call = call = attrs.evolve(call, payload=variants.with_effort(call.payload))
        # The model the call is routed as: the client's own (a variant's base), or the canonical id
        # of an alias no backend serves literally. Decided once, before the first selection.
        self.model = dispatch_model(runtime.discovery.view, call,
                                    self.variant.base if self.variant is not None else call.model, self.trace)
        self._last_route: tuple[str | None, str | None] = (None, self.model)
        # what the key and the client allow, per model
        self.reach = admission.Reach(runtime.pool, runtime.discovery, call, self.trace)
        self.route = RouteChoice(runtime, self.model, self.variant, self.reach, self.trace)
        # what the attempts spent, for the ledger
        self.meter = CallMeter(call.payload, call.snapshot, batch=purpose == BATCH)
        self.ticket: Ticket | None = None   # the limiter's reservation, settled when the call ends
        self.search_cost = 0.0              # USD of the tool loop's searches (each its own ledger record)
        self.purpose = purpose              # the ledger's: "cache" for the semantic cache's embeddings, "batch"
        self.billed_key: Any = None         # the key the ledger names when the call itself carries none
        self.quality: QualityGate | None = None   # fallback.quality_check's, for a buffered call it judges

    def admit(self) -> None:
        """Refuse the call (raise its GatewayError), or fix its reach and its policy-shaped body."""
        rt = self.runtime
        self.call = admission.admit(
            self.call, self.model, self.variant,
            lambda: variant_refusal(rt.pool, rt.discovery.view, self.call, self.variant, self.model,
                                    searches=rt.search is not None),
            self.reach, self.trace, rt.request_params_outcomes)
        self.route.holder = stored_responses.holder(rt.response_owners, self.call)   # previous_response_id's backend
        self.quality = gate_for(self.call, self.model, self._online)   # an invalid client schema: its 400

    @property
    def _online(self) -> bool:
        return self.variant is not None and self.variant.variant == variants.ONLINE

    def _bind(self, sink: ResponseSink, disconnected: Callable[[], Awaitable[None]]) -> None:
        self.sink = sink
        self.disconnected = disconnected
        # The relay's first start notes the time to first byte on the trace (for the metrics).
        first = FirstByteSink(sink, self.trace, lambda: self._last_route[0])
        # What the client has been sent is kept only when a broken stream may be continued (chat messages only).
        call = self.call
        resumable = call.stream and call.endpoint not in NO_MESSAGES and can_resume(call, self.model)
        # Not on images (an images answer without images: images_relay.py), nor where fallback.quality_check
        # applies: the spec has empty_reply_retry step aside there.
        empty_check = call.snapshot.fallback.empty_reply_retry.enabled and call.endpoint != Endpoint.EMBEDDINGS \
            and call.endpoint not in IMAGES | SCORING | AUDIO \
            and not quality_gate.applies(call, self.model, self._online)
        self.relay = first.relay = Relay(first, StreamAccumulator() if resumable else None, empty_check,
                                         call.snapshot.server.max_upstream_response_bytes)
        self.relay.meter = self.meter
        self.relay.check = self.quality
        self.meter.payload = call.payload   # admitted: the body as dispatched

    async def refuse(self, sink: ResponseSink, err: GatewayError) -> None:
        """End the call before any selection with ``err`` (an admission refusal), recorded like any end."""
        self._bind(sink, _never)
        self.runtime.calls.add(self)
        try:
            await self._end_with(err)
        finally:
            self._close()

    async def run(self, sink: ResponseSink, disconnected: Callable[[], Awaitable[None]]) -> None:
        """Serve the admitted call into ``sink``; ``disconnected`` returns when nobody waits for it any more."""
        self._bind(sink, disconnected)
        self.runtime.calls.add(self)
        ended = False   # stays so when the call's scope is cancelled
        try:
            host = self.runtime.nursery
            if host is None or self.call.stream and self.call.snapshot.may_think:
                # A stream may run a thinking decision timer: the call's own nursery holds it and the watcher.
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    ended = await self._serve_within(nursery.cancel_scope, nursery)
                    nursery.cancel_scope.cancel()   # the watcher and any timer: the call is over
            else:
                # Any other call starts nothing but its watcher, in the Runtime's nursery: the call runs in
                # a cancel scope and never waits for the watcher, which ends by itself when the server
                # reports the disconnect (hypercorn does once the answer is out; the Runtime's end cancels
                # what is left). No nursery per call (about 15 us, 78k instructions a stream and 0.5 KB
                # per open one less), and no scope of the watcher's own to cancel: a watcher unwinding a
                # cancellation cost about 60k instructions a call.
                with trio.CancelScope() as scope:
                    ended = await self._serve_within(scope, host)
            if self._shut_down and not ended:
                await self._end_with(ShuttingDown(
                    "The server is shutting down and its drain window ended before this call finished"))
        finally:
            self._close()

    async def _serve_within(self, scope: trio.CancelScope, host: trio.Nursery) -> bool:
        """Run the route loop in ``scope``, the call's only one: a client that leaves (told by the server
        through ``disconnected.subscribe`` where it can, else by the watcher, started in ``host``) and the end
        of the server's drain window (shut_down) both cancel it. True once it ended."""
        self._scope = scope
        if self._shut_down:
            scope.cancel()
        subscribe = getattr(self.disconnected, "subscribe", None)   # the server tells of a client that left
        if subscribe is None or not subscribe(self._client_left):
            host.start_soon(self._watch_client, scope)
        try:
            await self._serve()
            self.trace.add("completed", backend=self._last_route[0], model=self._last_route[1])
        except GatewayError as err:
            await self._end_with(err)
        except Exception as exc:   # a bug of ours outside an attempt (route choice, recovery): our 500 too
            await self._end_with(our_failure(exc, None))
        return True

    def _close(self) -> None:
        """The call's bookkeeping, however it ended."""
        self.runtime.calls.discard(self)
        if self.variant is not None:
            self.runtime.variant_requests.add((self.variant.variant, self.route.variant_reported))
        if self.trace.terminal is None:
            self.trace.add("client_disconnected", backend=self._last_route[0], model=self._last_route[1])
        meter, call = self.meter, self.call
        cost = float(meter.cost) if meter.cost is not None else None
        self.trace.spent = (meter.counts.input, meter.counts.output, cost)   # for the spans (tracing.otlp)
        self.runtime.traces.store(self.trace)
        if self.ticket is not None:
            used = meter.counts
            spent = float(meter.cost) if meter.cost is not None else None
            if self.search_cost:
                spent = (spent or 0.0) + self.search_cost
            self.runtime.limiter.settle(self.ticket, used.input + used.output, spent)
            self.ticket = None
        self.runtime.ledger.record(call_record(
            self.trace, key=call.key or self.billed_key, model=call.model, stream=call.stream, counts=meter.counts,
            cost=meter.cost, estimated=meter.estimated, served=self._last_route, purpose=self.purpose))

    def shut_down(self) -> None:
        """End this call now with a clean error (its upstream attempts are cancelled)."""
        self._shut_down = True
        if self._scope is not None:
            self._scope.cancel()

    async def _end_with(self, err: GatewayError) -> None:
        if isinstance(err, PermissionDenied):
            # The key's id is bound to the line; never the key. The client's text goes in quoted.
            log.info("refused: %r", err.message)
        # A backend's error saw the policy-shaped body; smart routing says which policy chose the model.
        params = attempt_body.param_headers(self.call) if isinstance(err, UpstreamStatusError) else []
        err = err.with_headers([*params, *self.call.route_headers])
        self.trace.add("failed", backend=getattr(err, "backend", None) or self._last_route[0],
                       model=self._last_route[1], status=err.status, code=err.code, error=err.message,
                       committed=self.sink.started)
        await self.sink.fail(err)

    def _client_left(self) -> None:
        """The server's word that the client left before its answer was complete (``ClientLink.subscribe``).
        A stream whose end is going out ([DONE] first) was whole: a client may close on reading [DONE], before
        the body's last bytes and before the sink is marked finished."""
        if not self._answer_out() and self._scope is not None:
            self._scope.cancel()

    def _answer_out(self) -> bool:
        """The answer is out, or its end is going out: a client leaving now is no client that left."""
        return self.sink.finished or self.relay.ending

    async def _watch_client(self, scope: trio.CancelScope) -> None:
        try:
            await self.disconnected()
        except Exception:
            # It may run in the Runtime's nursery, which must not fall with it: nobody can tell any more
            # whether the client waits, so the call ends as if it had left.
            log.exception("watching the client of request %s failed", self.call.request_id)
            scope.cancel()
            return
        # The server reports a disconnect once a complete response is out; that
        # is no client leaving, and the call's bookkeeping must still run.
        if not self._answer_out():
            scope.cancel()

    # --- the route loop -------------------------------------------------------

    async def _serve(self) -> None:
        rt, call = self.runtime, self.call
        if self.route.holder is None:   # not in this worker's memory: the store the workers share may know it
            self.route.holder = await stored_responses.shared_holder(rt.response_owners, call)
        budget = CallBudget.for_call(call.snapshot, self.model, call.stream)
        if not await tool_rounds.serve(self, budget):   # :online, MCP tools: the gateway's tool loop
            await self.run_attempts(budget)

    async def run_attempts(self, budget: CallBudget) -> None:
        """The call's attempts until one answered: retries, siblings, the fallback chain, within ``budget``;
        when none did and an answer failed only its quality check, the last such answer."""
        try:
            await self._route_loop(budget)
        except GatewayError:
            gate = self.quality
            if gate is None or gate.held is None or self.sink.started:
                raise
            self._last_route = (gate.held.backend, gate.model)
            self.trace.add("quality_check_unmet", backend=gate.held.backend, model=gate.model,
                           check=gate.held.verdict.check)
            await gate.deliver(self.relay.sink, self.meter)

    async def _route_loop(self, budget: CallBudget) -> None:
        rt, snap = self.runtime, self.call.snapshot
        plan = RoutePlan(self.model, snap.fallback, snap.retry)
        tried: set[str] = set()          # backends dialed for the current model
        last: AttemptFailed | None = None
        backend: BackendConfig | None = None
        first: tuple[str, str] | None = None   # the first dialed route: its dials take no permit
        while True:
            if backend is None and first is None and self.call.pin is not None and plan.model == self.model:
                backend = self.route.pinned(self.call, plan.model)  # None: the pinned backend cannot take it now
            if backend is None:
                try:
                    # any route other than the client's own choice is a fallback target
                    backend = self.route.pick(self.call, plan.model, tried,
                                              fallback=first is not None or plan.model != self.model)
                except (ModelNotFound, NoHealthyBackend) as err:
                    kind = Kind.MODEL_NOT_FOUND if isinstance(err, ModelNotFound) else Kind.UNHEALTHY
                    if plan.chain_allows(Failure(kind)):
                        before = plan.model
                        plan.moved_to_next_model(Failure(kind))
                        self._route_changed(None, before, None, plan.model, Failure(kind))
                        tried = set()
                        continue
                    # A known upstream failure says more than "nothing left to try".
                    raise self.route.fail_closed(last.error if last is not None else err) from None
            if budget.left() <= 0:
                raise budget.exhausted(backend.name)
            plan.attempted()
            tried.add(backend.name)
            # A fallback dial (another route after a real dial failed) takes a permit;
            # the first dial never does, even if it already goes to a chain model.
            bounded = first is not None and first != (backend.name, plan.model)
            first = first or (backend.name, plan.model)
            try:
                await self._attempt(backend, plan, budget, bounded=bounded)
                return
            except AttemptFailed as failed:
                self._failed_event(backend.name, plan.model, failed)
                if self.sink.started:
                    acc = self.relay.acc
                    if acc is None or acc.other_choices:   # nothing to continue from
                        raise failed.error from None
                    await Recovery(rt, self.call, self.route, acc, self._attempt, self._failed_event,
                                   self._route_changed, lambda: self._last_route).run(failed, backend, plan, budget)
                    return
                if last is None or failed.upstream:  # the backend's own answer is the one to preserve
                    last = failed
                failure = failed.failure
                step = plan.decide(failure, backend, budget.left(), rt.pool.rng.random())
            if isinstance(step, Retry):
                # No retry into an open circuit (these very failures, or others', may
                # have opened it): the call moves on as if the retries were spent.
                now = trio.current_time()
                due = now + step.delay
                if rt.health.view.admits(backend.name, plan.model, due):
                    self.trace.add("retry_scheduled", backend=backend.name, model=plan.model,
                                   delay_ms=round(step.delay * 1000, 3))
                    timing = self.trace.timing
                    if timing is not None:
                        timing.dial(now)   # a backoff the upstream's failure asked for: its time, not ours
                    await trio.sleep_until(due)
                    if timing is not None:
                        timing.hang_up(due)
                    if rt.health.view.admits(backend.name, plan.model, trio.current_time()):
                        continue
                step = MoveOn(sibling=True, chain=plan.chain_allows(failure))
            if isinstance(step, MoveOn):
                if step.sibling:
                    try:
                        sibling = self.route.pick(self.call, plan.model, tried, fallback=True)
                    except (ModelNotFound, NoHealthyBackend):
                        pass
                    else:
                        self._route_changed(backend.name, plan.model, sibling.name, plan.model, failure)
                        backend = sibling
                        plan.moved_to_sibling()
                        continue
                if step.chain:
                    before = plan.model
                    plan.moved_to_next_model(failure)
                    self._route_changed(backend.name, before, None, plan.model, failure)
                    tried, backend = set(), None
                    continue
            raise self.route.fail_closed(last.error) from None

    def _failed_event(self, backend: str, model: str, failed: AttemptFailed) -> None:
        f = failed.failure
        extra = {}
        gate = self.quality
        if f.kind is Kind.QUALITY_CHECK and gate is not None and gate.held is not None:
            gate.model = model   # the answer it keeps is this model's
            verdict = gate.held.verdict
            extra["quality_check_failed"] = {"check": verdict.check, "reason": verdict.reason}
        self.trace.add("attempt_failed", backend=backend, model=model, kind=f.kind.value, status=f.status,
                       timeout=f.timeout, error=failed.error.message, committed=self.sink.started, **extra)

    def _route_changed(self, from_backend: str | None, from_model: str, to_backend: str | None, to_model: str,
                       failure: Failure, **extra: Any) -> None:
        self.trace.add("route_changed", backend=to_backend, model=to_model, from_backend=from_backend,
                       from_model=from_model, reason=failure.kind.value, **extra)

    # --- one attempt ------------------------------------------------------------

    async def _attempt(self, backend: BackendConfig, plan: RoutePlan, budget: CallBudget, bounded: bool,
                       model: str | None = None, body: bytes | None = None, transform: Transform | None = None
                       ) -> None:
        rt, call = self.runtime, self.call
        model = model or plan.model
        self.attempts += 1
        self.trace.attempt = self.attempts
        self._last_route = (backend.name, model)
        log_fields.bind(backend=backend.name, model=model)   # for any line logged during this attempt
        refused = rt.stream_usage.refused(backend)   # it refused stream_options: its streams are not asked
        # a backend this call cannot be translated for is passed over, never the call's end
        sent = outbound(rt.wires, rt.prompts, call, self.model, backend, model, body, refused)
        wire, content, headers, url = sent.wire, sent.content, sent.headers, sent.url
        extra = {"span_id": sent.span_id} if sent.span_id is not None else {}
        self.trace.add("selected", backend=backend.name, model=model, fallback_dial=bounded, **extra)
        override = backend.retry_override
        limits = limits_for(call.snapshot, model, call.stream, fallback_hop=model != self.model,
                            backend_cap=override.timeout if override else None)
        request = rt.upstream.request("POST", url, headers=headers, content=content)
        # This backend answers with the id it was sent; the client sees the public one.
        upstream_id = backend.upstream_ids.get(model)
        rename = Rename(upstream_id, model) if upstream_id is not None and upstream_id != model else None
        if self.variant is not None and model == self.model:
            rename = Rename(None, self.call.model)   # the requested name, suffix and all
        before, thinking = self.relay.thinking, attempt_body.thinking_for(call, backend, model) if call.stream else None
        if thinking is not None and before is not None and before.in_content \
                and self.sink.started and transform is None:
            thinking.continue_in_content()   # a prefill/prompt resume continues the answer
        self.relay.begin(AttemptRelaySettings(rename, thinking, transform, attempt_body.hides_usage(call),
                                              self._nursery))
        droppable = attempt_body.drops_usage_on_refusal(call, backend, refused)
        self.meter.begin(model, backend.name)
        # A fallback dial waits for a permit first; the wait is not the backend's time.
        permit = await fallback_permit(rt.pool, call, backend, budget) if bounded else None
        whole = permit if permit is not None and permit_spans_answer(backend, call.stream) else None
        held = permit if whole is None else None   # freed at the headers
        attempt = AttemptBudget(limits, budget)
        probe = rt.health.dispatching(backend.name, model, trio.current_time())
        settled = False   # the route's circuit heard how it went
        timing = self.trace.timing
        with rt.pool.dispatched(backend.name):
            began = trio.current_time()
            if timing is not None:
                timing.dial(began)
            try:
                with attempt.scope:
                    with rt.upstream.errors(backend.name):
                        while True:   # twice only when the backend refuses the usage option we added
                            try:
                                if wire.sign is not None:   # over the final bytes, within the attempt's budget
                                    await wire.sign(request, backend)
                                response = wire.answer(await rt.upstream.send(request), call)
                            finally:
                                if held is not None:
                                    held.release()   # held from dial to response headers only
                                    held = None
                            # An answer arrived (whatever its status): its rate-limit headers describe the key.
                            rt.quota.observe(backend.name, response.headers, trio.current_time())
                            try:
                                await self._answer(backend, plan, response, attempt, began)
                                break
                            except AttemptFailed as failed:
                                if not (droppable and attempt_body.refuses_usage(failed.error)) \
                                        or (stripped := without_option(content)) is content:
                                    raise
                                status = failed.failure.status
                            finally:
                                await response.aclose()
                            # Nobody's failure: the same attempt, at once, without the option (actors/stream_usage.py).
                            droppable, began, content = False, trio.current_time(), stripped
                            rt.stream_usage.remember(backend, began)
                            self.trace.add("stream_usage_refused", backend=backend.name, model=model, status=status)
                            request = rt.upstream.request("POST", url, headers=headers, content=content)
                if attempt.scope.cancelled_caught and not await self.relay.finish_if_complete():
                    expired = attempt.expired(backend.name)
                    raise AttemptFailed(Failure(Kind.TIMEOUT, timeout=(expired.details or {}).get("timeout")), expired)
            except AttemptFailed as failed:
                settled = True
                error = failed.error.of_backend(backend.name) if isinstance(failed.error, UpstreamFailure) \
                    else failed.error
                if body is None and isinstance(error, UpstreamStatusError):   # quoting what it was sent
                    error = attempt_body.in_client_indices(error, call, model, backend, rt.prompts)
                if backend_fault(failed.failure):
                    rt.health.call_failed(backend.name, model, error.message, failing_caller(call, error))
                else:
                    rt.health.call_succeeded(backend.name, model)
                if error is not failed.error:   # the same failure, its error said of this backend and this call
                    raise AttemptFailed(failed.failure, error, failed.upstream) from None
                raise
            except UpstreamFailure as err:
                settled = True
                kind = Kind.PROTOCOL if isinstance(err, UpstreamProtocolError) else \
                    Kind.TIMEOUT if isinstance(err, UpstreamTimeout) else Kind.CONNECTION
                rt.health.call_failed(backend.name, model, err.message, failing_caller(call, err))
                timeout = (err.details or {}).get("timeout") if kind is Kind.TIMEOUT else None
                raise AttemptFailed(Failure(kind, timeout=timeout), err) from None
            except GatewayError:
                raise
            except Exception as exc:
                # Raised by our own code (the transport, a wire's translation, a simulator, the relay): our
                # 500, never the backend's failure; its circuit hears nothing (a probe is given back below).
                raise our_failure(exc, backend.name) from None
            finally:
                if timing is not None:
                    # A whole answer's wait ended when it was in hand; a stream's, or a failed attempt's, ends now.
                    reached = timing.reached
                    timing.hang_up(reached if reached is not None and not _streams(call) else trio.current_time())
                if whole is not None:
                    whole.release()
                self.meter.settle(self.relay.usage, self.relay.output_seen, self.relay.images,
                                  self.relay.search_units, self.relay.audio)
                if probe and not settled and not self.sink.finished:
                    # cancelled (the client left), or our own code failed, before the probe proved anything
                    rt.health.probe_abandoned(backend.name, model)
        settled = True
        rt.health.call_succeeded(backend.name, model)
        attempt_body.record_usage(rt.pool.signals, rt.usage, call, backend.name, model, began,
                                  self.relay.usage_tokens, self.relay.usage)

    def _answer(self, backend: BackendConfig, plan: RoutePlan, response: httpx.Response,
                attempt: AttemptBudget, began: float) -> Awaitable[None]:
        """The answer's relay, to await (returned, not awaited: no frame of this one for as long as a stream runs)."""
        headers = [*attempt_body.fallback_headers(self.call, self.model, plan, self.attempts),
                   *self.route.variant_headers(plan.model), *attempt_body.param_headers(self.call),
                   *self.call.route_headers]
        rt = self.runtime
        return answer(rt.pool, rt.response_owners, self.call, self.relay, backend, response, attempt, began, headers)


def _streams(call: Call) -> bool:
    """The answer goes on coming from the backend after its first byte went out (speech: always)."""
    return call.stream or call.endpoint == Endpoint.AUDIO_SPEECH


async def _never() -> None:
    await trio.sleep_forever()
