"""The Anthropic error envelope, for every answer under ``/anthropic/``."""

from __future__ import annotations

import json
from typing import Any

from switchyard.actors.errors import GatewayError, UpstreamStatusError

ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                   403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                   429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error"}


def anthropic_error_type(status: int) -> str:
    """Anthropic's error ``type`` for an HTTP status: other 4xx are invalid requests, other 5xx api errors."""
    return ANTHROPIC_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")


def anthropic_envelope(err: GatewayError, request_id: str | None = None) -> dict[str, Any]:
    """``err`` as the Messages API shapes errors: ``{"type": "error", "error": {"type", "message"}}``.

    A backend's error answer keeps its own message; one already in this shape
    (a native Anthropic backend's) is passed on as it came.
    """
    message = err.message
    if isinstance(err, UpstreamStatusError):
        try:
            raw = json.loads(err.raw_body)
        except ValueError:
            raw = None
        inner = raw.get("error") if isinstance(raw, dict) else None
        if isinstance(raw, dict) and isinstance(inner, dict) and raw.get("type") == "error" \
                and isinstance(inner.get("type"), str):
            return raw
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            message = inner["message"]
        elif isinstance(inner, str):
            message = inner
        else:
            text = err.raw_body.decode("utf-8", "replace").strip()[:2000]
            message = f"Backend '{err.backend}' answered HTTP {err.status}" + (f": {text}" if text else "")
    out: dict[str, Any] = {"type": "error", "error": {"type": anthropic_error_type(err.status), "message": message}}
    if request_id is not None:
        out["request_id"] = request_id
    return out
