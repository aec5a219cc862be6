"""A rerank or moderations answer, relayed whole, and what it billed for the ledger.

Both answer JSON with a ``results`` array; one without it is a backend's
failure (nothing was scored), so the call fails over like a protocol
failure. A rerank is billed per search unit (Cohere: one query over up to
100 documents, reported as ``meta.billed_units.search_units``) or per token
(vLLM and Jina report ``usage.total_tokens``; Cohere ``billed_units`` or
``meta.tokens.input_tokens``). Where no search units are reported they are
counted as Cohere counts them, one per started hundred documents, so a
model priced per search unit is priced on any backend. Tokens are all
input: a score generates nothing. Moderations report no usage; their
tokens are estimated from the input, as any answer without usage is.
"""

from __future__ import annotations

from typing import Any, Mapping

import httpx

from switchyard.actors.budgets import AttemptBudget
from switchyard.actors.errors import UpstreamProtocolError, UpstreamStatusError
from switchyard.actors.relay import AttemptFailed, Relay, read_json_answer
from switchyard.actors.routing.failover import Failure, Kind
from switchyard.config.endpoints import Endpoint

DOCUMENTS_PER_SEARCH_UNIT = 100


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _dig(payload: Any, *path: str) -> Any:
    for step in path:
        payload = payload.get(step) if isinstance(payload, dict) else None
    return payload


def rerank_tokens(payload: Any) -> int | None:
    """The input tokens a rerank answer reports, in any of the shapes its servers use (None: none)."""
    for path in (("usage", "total_tokens"), ("usage", "prompt_tokens"), ("meta", "billed_units", "input_tokens"),
                 ("meta", "tokens", "input_tokens")):
        found = _whole(_dig(payload, *path))
        if found is not None:
            return found
    return None


def search_units(payload: Any, request: Mapping[str, Any]) -> int:
    """The search units a rerank answer billed: as reported, else one per started hundred documents."""
    reported = _whole(_dig(payload, "meta", "billed_units", "search_units"))
    if reported is not None:
        return reported
    documents = request.get("documents")
    n = len(documents) if isinstance(documents, list) else 0
    return -(-n // DOCUMENTS_PER_SEARCH_UNIT)


async def relay_scores(relay: Relay, backend: str, response: httpx.Response, attempt: AttemptBudget,
                       headers: list[tuple[bytes, bytes]], endpoint: Endpoint, request: Mapping[str, Any]) -> None:
    """A 200 rerank or moderations answer to the client whole, what it billed noted on ``relay`` for the meter."""
    body, payload = await read_json_answer(backend, response, attempt, relay.answer_limit)
    if isinstance(payload, dict) and payload.get("error") is not None:
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamStatusError(backend, 502, body, b"application/json"))
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
            f"Backend '{backend}' answered a {endpoint} call with no 'results' array", code="empty_reply"))
    relay.output_seen = 0
    if endpoint == Endpoint.RERANK:
        tokens = rerank_tokens(payload)
        relay.usage_tokens = tokens
        relay.usage = None if tokens is None else {"prompt_tokens": tokens, "completion_tokens": 0,
                                                    "total_tokens": tokens}
        relay.search_units = search_units(payload, request)
    await relay.send_whole(body, payload, relay.cost_headers(headers))
