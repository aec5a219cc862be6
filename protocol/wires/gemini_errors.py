"""A Gemini error answer as the OpenAI error envelope, its retry hint as ``Retry-After``.

Google answers errors as ``{"error": {"code", "message", "status",
"details"}}`` with a gRPC status name (``RESOURCE_EXHAUSTED``,
``INVALID_ARGUMENT``, ...), and gives a 429's wait inside the body
(``google.rpc.RetryInfo``'s ``retryDelay``), not as a header. The HTTP
status is kept (failover classifies by it); the body becomes our envelope
with a ``type`` and ``code`` for the status (a context overflow is
``context_length_exceeded``, a missing model ``model_not_found``, so
failover reads them like any backend's), Google's status and retry delay
in ``details``; the delay becomes the ``Retry-After`` header once the
body is read (the attempt reads an error body before its headers are
judged). A body that is not Google's error shape passes as it came.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx

from switchyard.protocol.wires.translated import WholeBody, translated

# Google status -> (type, code) of our envelope
STATUSES = {"INVALID_ARGUMENT": ("invalid_request_error", "invalid_argument"),
            "FAILED_PRECONDITION": ("invalid_request_error", "failed_precondition"),
            "OUT_OF_RANGE": ("invalid_request_error", "out_of_range"),
            "UNAUTHENTICATED": ("invalid_request_error", "invalid_api_key"),
            "PERMISSION_DENIED": ("permission_error", "permission_denied"),
            "NOT_FOUND": ("not_found_error", "not_found"),
            "RESOURCE_EXHAUSTED": ("rate_limit_error", "rate_limit_exceeded"),
            "CANCELLED": ("server_error", "cancelled"),
            "INTERNAL": ("server_error", "internal_error"),
            "UNKNOWN": ("server_error", "unknown"),
            "UNAVAILABLE": ("service_unavailable", "unavailable"),
            "DEADLINE_EXCEEDED": ("timeout", "deadline_exceeded")}
CONTEXT_PHRASES = ("exceeds the maximum number of tokens", "input token count")
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def retry_seconds(delay: Any) -> float | None:
    """A protobuf Duration in JSON (``"37s"``, ``"0.5s"``) in seconds; None when it is not one."""
    if not isinstance(delay, str) or not delay.endswith("s"):
        return None
    try:
        seconds = float(delay[:-1])
    except ValueError:
        return None
    return seconds if seconds >= 0 and math.isfinite(seconds) else None


def envelope(obj: Any) -> tuple[dict[str, Any], float | None] | None:
    """(our envelope, the retry delay in seconds or None) for a Google error body; None for another shape."""
    error = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return None
    status = error.get("status")
    if not isinstance(status, str):
        status = ""
    kind, code = STATUSES.get(status, ("upstream_error", status.lower() or "upstream_error"))
    message = error["message"]
    details: dict[str, Any] = {"status": status} if status else {}
    delay = None
    listed = error.get("details")
    for item in listed if isinstance(listed, list) else ():
        if not isinstance(item, dict):
            continue
        if item.get("@type") == RETRY_INFO:
            delay = retry_seconds(item.get("retryDelay"))
            if delay is not None:
                details["retry_delay"] = item["retryDelay"]
        elif item.get("@type") == ERROR_INFO and isinstance(item.get("reason"), str):
            details["reason"] = item["reason"]
            if item["reason"] == "API_KEY_INVALID":
                code = "invalid_api_key"
    if code == "invalid_argument" and any(p in message.lower() for p in CONTEXT_PHRASES):
        code = "context_length_exceeded"
    elif code == "not_found" and "model" in message.lower():
        code = "model_not_found"
    out: dict[str, Any] = {"message": f"Gemini {status or 'error'}: {message}", "type": kind, "param": None,
                           "code": code}
    if details:
        out["details"] = details
    return {"error": out}, delay


class ErrorTranslator(WholeBody):
    """The whole error body, then our envelope; sets ``Retry-After`` on ``headers`` from the retry delay."""

    def __init__(self) -> None:
        super().__init__()
        self.headers: httpx.Headers | None = None

    def translate(self, parsed: Any, raw: bytes) -> list[bytes]:
        found = envelope(parsed)
        if found is None:
            return [raw]
        body, delay = found
        if delay is not None and self.headers is not None and "retry-after" not in self.headers:
            self.headers["retry-after"] = str(math.ceil(delay))
        return [json.dumps(body).encode()]


def openai_error(response: httpx.Response) -> httpx.Response:
    """A Gemini error answer with our envelope as its body (translated as it is read)."""
    translator = ErrorTranslator()
    out = translated(response, translator, response.headers.get("content-type", "application/json"))
    translator.headers = out.headers
    return out
