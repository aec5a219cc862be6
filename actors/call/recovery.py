"""Mid-stream recovery: a committed stream that breaks continues elsewhere.

A collaborator the RequestActor asks once its stream broke after the first
byte: pick the next route (siblings first if asked, then the chain when the
failure triggers it), choose how to continue (prefill, prompt or restart;
see ``actors.routing.resume``), learn a refused prefill and restart
instead, and end with an in-band error when nothing is left. It is handed
what it needs (the accumulated stream, the route choice, the actor's one
attempt and its route events) and keeps nothing of the actor's.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import attrs

from switchyard.actors.budgets import CallBudget
from switchyard.actors.call.attempt_body import for_backend
from switchyard.actors.errors import ModelNotFound, NoHealthyBackend
from switchyard.actors.messages import Call
from switchyard.actors.relay import AttemptFailed
from switchyard.actors.routing.failover import Kind, RoutePlan
from switchyard.actors.routing.resume import (
    RestartFilter,
    ResumeMode,
    choose_mode,
    kind_takes_prefill,
    resume_payload,
    takes_resume,
)
from switchyard.config.schema import BackendConfig, Snapshot

if TYPE_CHECKING:
    from switchyard.actors.call.route_choice import RouteChoice
    from switchyard.actors.routing.stream_state import StreamAccumulator
    from switchyard.actors.runtime import Runtime

# the actor's one attempt (backend, plan, budget, bounded, model, body, transform)
Attempt = Callable[..., Awaitable[None]]


@attrs.define
class Recovery:
    runtime: "Runtime"
    call: Call
    route: "RouteChoice"
    acc: "StreamAccumulator"
    attempt: Attempt
    failed_event: Callable[[str, str, AttemptFailed], None]
    route_changed: Callable[..., None]
    last_route: Callable[[], tuple[str | None, str | None]]

    async def run(self, failed: AttemptFailed, backend: BackendConfig, plan: RoutePlan, budget: CallBudget) -> None:
        """Continue the committed stream on another backend, or end it with an in-band error."""
        rt, call = self.runtime, self.call
        cfg = call.snapshot.streaming.mid_stream_fallback
        used = {(backend.name, plan.model)}
        hops = 0
        while hops < cfg.max_fallback_attempts:
            if budget.left() <= 0:
                raise budget.exhausted(backend.name)
            target = self._resume_target(plan, used, cfg.same_model_first, plan.triggered(failed.failure))
            if target is None:
                break
            before = self.last_route()
            backend, model = target
            used.add((backend.name, model))
            hops += 1
            takes_prefill = (_takes_prefill(call.snapshot, backend, model)
                             and (backend.name, model) not in rt.pool.no_prefill)
            mode = choose_mode(self.acc, cfg, takes_prefill)
            self.route_changed(before[0], before[1] or model, backend.name, model, failed.failure,
                                mid_stream=True, mode=mode.value)
            try:
                await self._resume_attempt(backend, plan, model, mode, budget, failed)
                return
            except AttemptFailed as again:
                self.failed_event(backend.name, model, again)
                if mode is ResumeMode.PREFILL and again.failure.kind is Kind.CLIENT_ERROR:
                    # It refused the prefill: learn that, and ask it again by restarting.
                    rt.pool.no_prefill.add((backend.name, model))
                    try:
                        await self._resume_attempt(backend, plan, model, ResumeMode.RESTART, budget, failed)
                        return
                    except AttemptFailed as third:
                        self.failed_event(backend.name, model, third)
                        again = third
                if again.upstream:  # keep the backend's own failure, not our permit verdict
                    failed = again
        raise self.route.fail_closed(failed.error)

    def _resume_target(self, plan: RoutePlan, used: set[tuple[str, str]], same_model_first: bool,
                       chain: bool) -> tuple[BackendConfig, str] | None:
        """The next healthy (backend, model): siblings first if asked, then the chain if triggered."""
        models = list(plan.models[plan.model_index:]) if chain else [plan.model]
        if not same_model_first:
            models = models[1:]
        rt, call = self.runtime, self.call
        for model in models:
            tried = {b for b, m in used if m == model}
            # After output has started only the OpenAI wire is used: a backend spoken to through a
            # translation (Anthropic Messages, the Responses bridge) is skipped, not half converted,
            # and so is a Unix-socket backend (the specification's rule: takes_resume).
            tried |= {b.name for b in rt.pool.serving(model, rt.discovery.view, call.snapshot)
                      if rt.wires.translates(call, b, model) or not takes_resume(b)}
            try:
                return self.route.pick(call, model, tried, fallback=True), model
            except (ModelNotFound, NoHealthyBackend):
                continue
        return None

    async def _resume_attempt(self, backend: BackendConfig, plan: RoutePlan, model: str, mode: ResumeMode,
                              budget: CallBudget, failed: AttemptFailed) -> None:
        call = self.call
        # The wire id: this backend's upstream_id for the model, if it has one.
        payload = for_backend(
            call, resume_payload(call.payload, backend.upstream_ids.get(model, model), self.acc, mode,
                                 call.snapshot.streaming.mid_stream_fallback, backend.type),
            model, backend, self.runtime.prompts, refused=self.runtime.stream_usage.refused(backend))
        transform = None
        if mode is ResumeMode.RESTART:
            marker: dict[str, Any] = {
                "id": self.acc.id, "object": "chat.completion.chunk", "created": self.acc.created,
                "model": self.acc.model, "choices": [],
                "route_change": {"discard_previous_output": True, "reason": failed.failure.kind.value,
                                 "error": failed.error.message, "backend": backend.name, "model": model}}
            transform = RestartFilter(self.acc, marker).feed
        await self.attempt(backend, plan, budget, bounded=True, model=model, body=json.dumps(payload).encode(),
                            transform=transform)


def _takes_prefill(snapshot: Snapshot, backend: BackendConfig, model: str) -> bool:
    meta = snapshot.metadata_for(model, backend.name)
    if meta is not None and meta.supports_assistant_prefill is not None:
        return meta.supports_assistant_prefill
    return kind_takes_prefill(backend.type)


def can_resume(call: Call, model: str | None = None) -> bool:
    """Whether a broken stream of ``call``, routed as ``model`` (default its own), may continue."""
    fb = call.snapshot.fallback
    if not (fb.enabled and fb.mid_stream_enabled):
        return False
    return bool(fb.fallback_chains.get(model or call.model)) \
        or call.snapshot.streaming.mid_stream_fallback.same_model_first
