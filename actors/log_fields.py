"""The request's log fields, in a contextvar: bound by whoever knows them, written by the log formatter.

``App.http`` binds the request's identifiers for the length of the request;
each attempt adds ``backend`` and ``model``. Trio copies the context into
tasks started from the request, so every line logged on behalf of a request
carries them without being passed along (``protocol/http/logs.py`` writes them).
"""

from __future__ import annotations

import contextvars
from typing import Mapping

# Fields a line may carry besides the standard ones, in output order.
FIELDS = ("trace_id", "x_request_id", "client_ref", "request_id", "key_id", "backend", "model", "event")

_bound: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar("switchyard_log_fields",
                                                                                    default=None)


def bind(**fields: str | None) -> contextvars.Token[Mapping[str, str] | None]:
    """Add ``fields`` (None values skipped) to this context's log fields; ``unbind`` the token after."""
    current = _bound.get() or {}
    return _bound.set({**current, **{k: v for k, v in fields.items() if v is not None}})


def unbind(token: contextvars.Token[Mapping[str, str] | None]) -> None:
    _bound.reset(token)


def bound() -> Mapping[str, str]:
    return _bound.get() or {}
