"""An external guardrail: the texts POSTed to the operator's service, its verdict read back.

Request (JSON): ``{"guardrail", "stage", "request_id", "model", "messages": [{"role", "content"}]}``,
one message per piece of text the guardrails read, in order. Answer:
``{"action": "allow"}``, ``{"action": "block", "reason": "..."}`` or
``{"action": "rewrite", "messages": [...]}`` with as many messages, each a
``content`` string. It goes over the gateway's shared upstream client; the
whole exchange runs under ``timeout``, and a timeout, a non-2xx status, a
failed connection or any other answer is a failure that ``on_failure``
settles (docs/guardrails.md).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Sequence

import httpx
import trio
from attrs import frozen

from switchyard.actors.bodies import ResponseTooLarge, whole_body
from switchyard.actors.errors import UpstreamFailure
from switchyard.actors.guardrails.texts import Slot
from switchyard.config.guardrails import Webhook

if TYPE_CHECKING:
    from switchyard.actors.ports import Upstream

log = logging.getLogger("switchyard.guardrails")
ANSWER_LIMIT = 4 * 1024 * 1024
REASON_MAX = 200


@frozen
class Answer:
    action: str                               # allow | block | rewrite | error
    texts: tuple[str, ...] | None = None      # rewrite: the new text of each slot
    reason: str | None = None                 # block: the service's words (shown to the client, not recorded)
    failure: str | None = None                # error: timeout | connect | status | malformed


async def ask(upstream: "Upstream", name: str, hook: Webhook, stage: str, slots: Sequence[Slot], *,
              request_id: str, model: str) -> Answer:
    """The service's verdict on ``slots``, or an ``error`` answer saying why there is none."""
    body = {"guardrail": name, "stage": stage, "request_id": request_id, "model": model,
            "messages": [{"role": s.role, "content": s.text} for s in slots]}
    headers = [("content-type", "application/json"), *hook.headers]
    request = upstream.request("POST", httpx.URL(hook.url), headers=headers, content=json.dumps(body).encode())
    status, raw = 0, b""
    with trio.move_on_after(hook.timeout) as scope:
        try:
            with upstream.errors(f"guardrail:{name}"):
                response = await upstream.send(request)
                try:
                    status, raw = response.status_code, await whole_body(response, ANSWER_LIMIT)
                finally:
                    await response.aclose()
        except ResponseTooLarge:
            return _failed(name, "malformed", f"answered more than {ANSWER_LIMIT} bytes")
        except UpstreamFailure as err:
            return _failed(name, "connect", type(err).__name__)
    if scope.cancelled_caught:
        return _failed(name, "timeout", f"no answer within {hook.timeout:g}s")
    if not 200 <= status < 300:
        return _failed(name, "status", f"answered HTTP {status}")
    return _read(name, raw, len(slots))


def _read(name: str, raw: bytes, count: int) -> Answer:
    try:
        answer: Any = json.loads(raw)
    except ValueError:
        return _failed(name, "malformed", "the answer is not JSON")
    action = answer.get("action") if isinstance(answer, dict) else None
    if action == "allow":
        return Answer("allow")
    if action == "block":
        reason = answer.get("reason")
        return Answer("block", reason=reason[:REASON_MAX] if isinstance(reason, str) and reason else None)
    if action == "rewrite":
        messages = answer.get("messages")
        if not isinstance(messages, list) or len(messages) != count:
            return _failed(name, "malformed", f"a rewrite must hold {count} messages")
        given = [m.get("content") if isinstance(m, dict) else None for m in messages]
        texts = tuple(t for t in given if isinstance(t, str))
        if len(texts) != len(given):
            return _failed(name, "malformed", "every rewritten message needs a string content")
        return Answer("rewrite", texts=texts)
    return _failed(name, "malformed", "'action' must be allow, block or rewrite")


def _failed(name: str, failure: str, why: str) -> Answer:
    log.warning("guardrail %r: the webhook gave no verdict (%s: %s)", name, failure, why)
    return Answer("error", failure=failure)
