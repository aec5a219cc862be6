"""The guardrails of one call: the input stage before anything is decided on the prompt, the output
stage on the answer, and the verdicts both leave for the ledger and the metrics.

The input stage runs after authentication and before smart routing, dedup,
the cache and dispatch (``actors/call/pipeline.py``): in enforce mode a block
stops the call there, and a mask (or a webhook's rewrite) replaces the
payload, so the classifier, the cache and the upstream all read the masked
prompt. Monitor mode records the verdict and changes nothing. Guardrails run
in the order they are configured, each on what the one before left.

Only chat calls are read (``/v1/chat/completions`` and the Messages door,
which is a chat call inside); a call of another endpoint in scope of an
enforcing guardrail is refused (it would pass unread), in monitor mode
recorded as ``unread``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

import attrs

from switchyard.actors.guardrails import moderation, webhook
from switchyard.actors.guardrails.texts import Slot, request_slots, rewrite
from switchyard.actors.guardrails.verdicts import (
    GuardrailBlocked,
    GuardrailUnavailable,
    GuardrailVerdicts,
    Masker,
    Verdict,
    blocked,
    in_scope,
    judge,
    unmaskable,
    verdicts_json,
)
from switchyard.actors.messages import Call
from switchyard.config.endpoints import Endpoint
from switchyard.config.guardrails import Guardrail

if TYPE_CHECKING:
    from switchyard.actors.events import CallTrace
    from switchyard.actors.ports import Upstream


class Screen:
    """The guardrails in scope of one call, its placeholders, and every verdict so far."""

    def __init__(self, runtime: Any, actor_class: Any, call: Call, guardrails: Sequence[Guardrail]) -> None:
        # the runtime and the RequestActor class run a moderation model's call (``moderation.py``)
        self.runtime, self.actor_class = runtime, actor_class
        self.upstream: "Upstream" = runtime.upstream                   # the webhooks' client
        self.counts: GuardrailVerdicts = runtime.guardrail_verdicts   # every verdict, for the metrics
        self.call = call   # as it arrived: its key pays for the moderation calls
        self.request_id = call.request_id
        self.model = call.model
        self.guardrails = tuple(guardrails)
        self.masker = Masker()
        self.verdicts: list[Verdict] = []

    def record(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)
        self.counts.verdict(verdict)

    def ledger_field(self) -> str | None:
        return verdicts_json(self.verdicts)

    def attach(self, trace: "CallTrace") -> None:
        """The trace carries the screen to the call's ledger record (``guardrails``)."""
        trace.guardrails = self

    def output(self) -> tuple[Guardrail, ...]:
        return tuple(g for g in self.guardrails if g.reads("output"))

    async def screen_input(self, call: Call) -> Call:
        """The call as the input guardrails leave it; a block raises ``GuardrailBlocked``."""
        if call.endpoint != Endpoint.CHAT:
            return self._unread(call)
        on_input = [g for g in self.guardrails if g.reads("input")]
        payload = call.payload
        for g in on_input:
            slots = request_slots(payload)
            if not slots:
                break
            texts = await self.check(g, "input", slots)
            if texts is not None:
                payload = rewrite(payload, slots, texts)
        if payload is call.payload:
            return call
        return _rewritten(call, payload)

    async def check(self, g: Guardrail, stage: str, slots: Sequence[Slot]) -> tuple[str, ...] | None:
        """One guardrail on ``slots``: its verdict recorded; the new texts when it changed them (enforce)."""
        if g.webhook is not None:
            return await self._webhook(g, stage, slots)
        if g.moderation is not None:
            await self._moderation(g, stage, slots)
            return None
        outcome = judge(g, stage, slots, self.masker)
        if outcome.verdict is None:
            return None
        self.record(outcome.verdict)
        if outcome.blocked_by is not None:
            raise blocked(g, stage, outcome.blocked_by)
        if outcome.unmaskable is not None:
            raise unmaskable(g, stage, outcome.unmaskable)
        changed = outcome.texts != tuple(s.text for s in slots)
        return outcome.texts if changed else None

    async def _webhook(self, g: Guardrail, stage: str, slots: Sequence[Slot]) -> tuple[str, ...] | None:
        assert g.webhook is not None
        answer = await webhook.ask(self.upstream, g.name, g.webhook, stage, slots,
                                   request_id=self.request_id, model=self.model)
        enforce = g.mode == "enforce"
        if answer.action == "error":
            self._failed(g, stage, g.webhook.on_failure, answer.failure)
            return None
        self.record(Verdict(g.name, stage, g.mode, answer.action))
        if not enforce:
            return None
        if answer.action == "block":
            said = f": {answer.reason}" if answer.reason else ""
            raise GuardrailBlocked(f"Guardrail '{g.name}' blocked the {_what(stage)}{said}",
                                   details={"guardrail": g.name, "stage": stage, "detector": "webhook"})
        if answer.action == "rewrite" and answer.texts != tuple(s.text for s in slots):
            return answer.texts
        return None

    async def _moderation(self, g: Guardrail, stage: str, slots: Sequence[Slot]) -> None:
        assert g.moderation is not None
        judged = await moderation.ask(self.runtime, self.actor_class, self.call, g.name, g.moderation,
                                      [s.text for s in slots])
        if judged.failure is not None:
            self._failed(g, stage, g.moderation.on_failure, judged.failure)
            return
        self.record(Verdict(g.name, stage, g.mode, "block" if judged.flagged else "allow",
                            categories=judged.flagged))
        if judged.flagged and g.mode == "enforce":
            raise GuardrailBlocked(f"Guardrail '{g.name}' blocked the {_what(stage)}: the moderation model "
                                   f"flagged {', '.join(judged.flagged)}",
                                   details={"guardrail": g.name, "stage": stage, "detector": "moderation",
                                            "categories": list(judged.flagged)})

    def _failed(self, g: Guardrail, stage: str, on_failure: str, failure: str | None) -> None:
        """No verdict came (a webhook's or a moderation model's): ``on_failure`` settles it."""
        closed = on_failure == "fail_closed"
        self.record(Verdict(g.name, stage, g.mode, "block" if closed else "allow", failure=failure))
        if closed and g.mode == "enforce":
            raise GuardrailUnavailable(f"Guardrail '{g.name}' could not judge the {_what(stage)} "
                                       f"({failure}) and fails closed",
                                       details={"guardrail": g.name, "stage": stage, "reason": failure})

    def _unread(self, call: Call) -> Call:
        for g in self.guardrails:
            self.record(Verdict(g.name, "input" if g.reads("input") else "output", g.mode, "unread"))
            if g.mode == "enforce":
                raise GuardrailBlocked(f"Guardrail '{g.name}' applies to this call, and the guardrails read only "
                                       f"chat calls (/v1/chat/completions, /anthropic/v1/messages), not "
                                       f"{call.endpoint}: refused rather than passed unread",
                                       details={"guardrail": g.name, "stage": "input", "reason": "unread"})
        return call


def _what(stage: str) -> str:
    return "request" if stage == "input" else "answer"


def _rewritten(call: Call, payload: dict[str, Any]) -> Call:
    """The call with its masked payload (and body). A Messages call's own body (the native passthrough)
    is the unmasked original, so it is dropped: the masked translation goes to every backend."""
    ingress = call.ingress
    if "messages_body" in ingress:
        ingress = {k: v for k, v in ingress.items() if k not in ("messages_body", "chat_payload")}
    return attrs.evolve(call, payload=payload, body=json.dumps(payload).encode(), ingress=ingress)


def screen_for(runtime: Any, actor_class: Any, call: Call) -> Screen | None:
    """The call's screen, or None when no guardrail's scope takes it (the common case: nothing to do).
    ``actor_class``: the ``RequestActor`` class, for moderation models (the call package imports this one)."""
    configured = call.snapshot.guardrails
    if not configured:
        return None
    key_id = call.key.id if call.key is not None else None
    chosen = [g for g in configured if in_scope(g, key_id, call.model)]
    return Screen(runtime, actor_class, call, chosen) if chosen else None
