"""An images API answer, relayed whole, and what it generated for the ledger.

An images call is priced per generated image (``per_image`` in the model's
pricing, by size, by quality tier, or by size then quality) and, for the
token-billed models (gpt-image-1), on the usage the answer reports. So the
relay counts the images the answer holds (``data``) and the size and
quality they were made at: the answer's own ``size``/``quality`` when it
says (gpt-image-1 does), else the request's, else OpenAI's defaults
(1024x1024, standard). An answer with no image is a backend's failure:
nothing was made, so the call fails over like a protocol failure.
"""

from __future__ import annotations

from typing import Any, Mapping

import httpx

from switchyard.actors.budgets import AttemptBudget
from switchyard.actors.errors import UpstreamProtocolError, UpstreamStatusError
from switchyard.actors.relay import AttemptFailed, Relay, read_json_answer
from switchyard.actors.routing.failover import Failure, Kind
from switchyard.actors.usage import total_tokens

DEFAULT_SIZE = "1024x1024"
DEFAULT_QUALITY = "standard"


def generated(payload: Any, request: Mapping[str, Any]) -> tuple[tuple[str | None, str | None, int], ...]:
    """What an images answer made, as the ledger counts it: ((size, quality, n),), or () for none."""
    data = payload.get("data") if isinstance(payload, dict) else None
    n = sum(1 for item in data if isinstance(item, dict)) if isinstance(data, list) else 0
    if n == 0:
        return ()

    def said(field: str, default: str) -> str:
        for source in (payload, request):
            value = source.get(field)
            if isinstance(value, str) and value and value != "auto":
                return value
        return default
    return ((said("size", DEFAULT_SIZE), said("quality", DEFAULT_QUALITY), n),)


async def relay_images(relay: Relay, backend: str, response: httpx.Response, attempt: AttemptBudget,
                       headers: list[tuple[bytes, bytes]], request: Mapping[str, Any]) -> None:
    """A 200 images answer to the client whole, its images and usage noted on ``relay`` for the meter."""
    body, payload = await read_json_answer(backend, response, attempt, relay.answer_limit)
    if isinstance(payload, dict) and payload.get("error") is not None:
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamStatusError(backend, 502, body, b"application/json"))
    relay.images = generated(payload, request)
    if not relay.images:
        raise AttemptFailed(Failure(Kind.PROTOCOL), UpstreamProtocolError(
            f"Backend '{backend}' answered an images call with no image in 'data'", code="empty_reply"))
    relay.usage_tokens = total_tokens(payload)
    usage = payload.get("usage")
    relay.usage = usage if isinstance(usage, dict) else None
    relay.output_seen = 0
    await relay.send_whole(body, payload, relay.cost_headers(headers))
