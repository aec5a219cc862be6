"""The LLM classifier's call: one chat completion (and at most one correction) under one deadline.

The call goes through the same upstream client, auth and body shaping as
client traffic (the backend's wire id for the model, its
``request_extensions``), and carries ``x-smart-route-bypass: true`` so a
router behind that backend (possibly this very instance) never classifies
the classifier's own call.

``timeout_ms`` bounds the whole call, correction included: classification
sits in front of the client's first byte, so its cost must have a ceiling.
Every try that was sent leaves a ``purpose="classifier"`` usage record, failed
ones too, because they cost a round trip and often billed tokens. Any
failure is a ``ClassifierFailed``; the caller then routes on the rule result.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from switchyard.actors.addressing import api_url, auth_headers
from switchyard.actors.bodies import ResponseTooLarge, whole_body
from switchyard.actors.errors import UpstreamFailure, UpstreamTimeout
from switchyard.actors.ports import Upstream
from switchyard.actors.routing.body_merge import merge_body
from switchyard.actors.routing.classification import Classification
from switchyard.actors.routing.classifier_prompt import (
    MalformedAnswer,
    classifier_request,
    correction_messages,
    parse_answer,
    strategy_for,
)
from switchyard.actors.usage import UsageLedger, UsageRecord, token_counts
from switchyard.config.schema import BackendConfig
from switchyard.config.smart_routing import ClassifierSettings

log = logging.getLogger("switchyard.classifier")

ANSWER_LIMIT = 1024 * 1024   # a classification is a few hundred bytes; more is a broken backend

BYPASS_HEADER = ("x-smart-route-bypass", "true")
PURPOSE = "classifier"
REASONS = ("timeout", "upstream_error", "malformed", "error")


class ClassifierFailed(Exception):
    """The classification could not be had; ``reason`` is one of REASONS (a metric label)."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(f"{reason}: {message}" if message else reason)
        self.reason = reason
        self.message = message


async def classify_with_llm(upstream: Upstream, backend: BackendConfig, settings: ClassifierSettings,
                            payload: Mapping[str, Any], *, request_id: str, key_id: str | None,
                            ledger: UsageLedger, now: Callable[[], float]) -> Classification:
    """Classify ``payload`` with the configured model on ``backend``, or raise ``ClassifierFailed``."""
    llm = settings.llm
    if not llm.model:
        raise ClassifierFailed("error", "smart_routing.classifier.llm.model: not set")
    tries = _Tries(upstream, backend, settings, request_id, key_id, ledger, now)
    deadline = trio.move_on_after(llm.timeout_ms / 1000)
    try:
        with deadline:
            return await tries.run(payload)
    finally:
        # A try cut short is still a try that was sent; cancelled from outside, it is an error.
        tries.abandon("timeout" if deadline.cancelled_caught else "error")
    raise ClassifierFailed("timeout", f"no answer from backend '{backend.name}' within {llm.timeout_ms} ms")


class _Tries:
    """The tries of one classification and their usage records."""

    def __init__(self, upstream: Upstream, backend: BackendConfig, settings: ClassifierSettings, request_id: str,
                 key_id: str | None, ledger: UsageLedger, now: Callable[[], float]) -> None:
        self.upstream = upstream
        self.backend = backend
        self.settings = settings
        self.model: str = settings.llm.model or ""
        self.strategy = strategy_for(settings.llm.structured_output, backend.type)
        self.request_id = request_id
        self.key_id = key_id
        self.ledger = ledger
        self.now = now
        self.url = api_url(backend.url, "/v1/chat/completions")
        self.headers = [("content-type", "application/json"), *auth_headers(backend), BYPASS_HEADER]
        self.pending: float | None = None      # when the try in flight was sent

    async def run(self, payload: Mapping[str, Any]) -> Classification:
        body = classifier_request(payload, self.settings, self.strategy)
        retries = max(0, self.settings.llm.max_retries)
        while True:
            began, status, raw = await self._send(body)
            answer = _json(raw)
            try:
                result = parse_answer(answer if answer is not None else raw, self.strategy, self.settings)
            except MalformedAnswer as err:
                # Spec: a malformed 2xx answer is an upstream_error with status 200 and no output.
                self._record(began, "upstream_error", status, answer, output=False)
                if retries == 0:
                    raise ClassifierFailed("malformed", f"backend '{self.backend.name}': {err.reason}") from None
                retries -= 1
                body = correction_messages(body, err.text, err.reason)
                continue
            self._record(began, "ok", status, answer)
            return result

    async def _send(self, body: dict[str, Any]) -> tuple[float, int, bytes]:
        """One try: (when it was sent, its 2xx status, its body); any other end is recorded and raised."""
        b = self.backend
        wire = merge_body({**body, "model": b.upstream_ids.get(self.model, self.model)}, b.request_extensions)
        request = self.upstream.request("POST", self.url, headers=self.headers, content=json.dumps(wire).encode())
        began = self.pending = self.now()
        try:
            with self.upstream.errors(b.name):
                response = await self.upstream.send(request)
                try:
                    raw = await whole_body(response, ANSWER_LIMIT)
                finally:
                    await response.aclose()
        except ResponseTooLarge:
            self._record(began, "upstream_error", response.status_code, None)
            raise ClassifierFailed("upstream_error",
                                   f"backend '{b.name}' answered more than {ANSWER_LIMIT} bytes") from None
        except UpstreamFailure as err:
            timed_out = isinstance(err, UpstreamTimeout)
            self._record(began, "timeout" if timed_out else "upstream_error", None, None)
            raise ClassifierFailed("timeout" if timed_out else "upstream_error", err.message) from None
        except Exception as exc:   # inside the backend's adapter (its transport, a simulator): its failure
            self._record(began, "upstream_error", None, None)
            log.error("backend %r failed inside its adapter (%s) on a classification", b.name, type(exc).__name__,
                      exc_info=exc)
            raise ClassifierFailed("upstream_error", f"backend '{b.name}' failed inside its adapter "
                                                     f"({type(exc).__name__})") from None
        status = response.status_code
        if not 200 <= status < 300:
            self._record(began, "upstream_error", status, _json(raw))
            raise ClassifierFailed("upstream_error", f"backend '{b.name}' answered HTTP {status}")
        return began, status, raw

    def _record(self, began: float, outcome: str, status: int | None, answer: Any, output: bool = True) -> None:
        self.pending = None
        usage = answer.get("usage") if isinstance(answer, dict) else None
        model = answer.get("model") if isinstance(answer, dict) else None
        input_tokens, output_tokens = token_counts(usage)
        output_tokens = output_tokens if output else 0
        self.ledger.record(UsageRecord(
            purpose=PURPOSE, request_id=self.request_id, key_id=self.key_id, backend=self.backend.name,
            model=model if isinstance(model, str) and model else self.model,
            input_tokens=input_tokens, output_tokens=output_tokens,
            latency_seconds=max(0.0, self.now() - began), outcome=outcome, status=status, at=began))

    def abandon(self, outcome: str) -> None:
        """Record the try in flight, if any, as ended by ``outcome`` (no answer arrived)."""
        if self.pending is not None:
            self._record(self.pending, outcome, None, None)


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
