"""A relayed batch on its provider's wire: the input file the provider is sent, and its batch object read back.

OpenAI and Azure OpenAI speak one Files and Batch API: ``POST /v1/files``
(multipart: ``purpose=batch`` and the JSONL ``file``), ``POST /v1/batches``
(``input_file_id``, ``endpoint``, ``completion_window``, ``metadata``),
``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET`` and
``DELETE /v1/files/{id}``, ``GET /v1/files/{id}/content``. An azure backend
is addressed at its resource's v1 API root (``.../openai/v1``, as its kind
requires), where these routes take the same paths with no ``api-version``
and the key in an ``api-key`` header; a line's ``model`` names the
deployment there, which is that backend's ``upstream_id`` for the model.

The provider's batch object (the openai SDK's ``Batch``) is read for what
the gateway's row keeps: status, the instants of each status reached,
``request_counts``, ``errors``, and the provider's own file ids, which the
gateway maps to files of its own once the batch ends. Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import attrs
from attrs import frozen

from switchyard.actors import safe_text
from switchyard.actors.batches.records import RUNNABLE, TERMINAL, Batch, Line
from switchyard.actors.errors import UpstreamProtocolError
from switchyard.actors.routing.body_merge import merge_body
from switchyard.config.schema import BackendConfig, BackendType

# The kinds whose providers run batches themselves: a batch is relayed only when every backend of its model is one.
RELAYABLE = frozenset({BackendType.OPENAI, BackendType.AZURE})
STATUSES = TERMINAL | RUNNABLE
TIMES = ("in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
         "cancelled_at")
FILES, BATCHES = "/v1/files", "/v1/batches"


def model_of(line: Line) -> str | None:
    """The ``model`` a line's body names (validated at upload: a string), None when it names none."""
    try:
        body = json.loads(line.body)
    except ValueError:
        return None
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) and model else None


def input_file(lines: Sequence[Line], wire_model: str, backend: BackendConfig) -> bytes:
    """The JSONL the provider is sent: the lines in order (so the provider's line numbers are the client's),
    each body with ``model`` renamed to ``wire_model`` and the backend's ``request_extensions.body`` merged
    in, as any call to that backend has them."""
    out = []
    for line in lines:
        body = merge_body({**json.loads(line.body), "model": wire_model}, backend.request_extensions)
        request = {"custom_id": line.custom_id, "method": "POST", "url": line.url, "body": body}
        text = json.dumps(request, ensure_ascii=False, separators=(",", ":"))
        # a lone surrogate (valid JSON the upload kept as its escape) has no UTF-8: such a line stays escaped
        out.append(text if safe_text.is_clean(text) else json.dumps(request, separators=(",", ":")))
    return ("\n".join(out) + "\n").encode()


@frozen
class Provided:
    """The provider's batch object, as much of it as the gateway keeps."""

    id: str
    status: str | None                   # None: a status the gateway does not know (the row keeps its own)
    times: Mapping[str, float]
    counts: tuple[int, int, int] | None  # request_counts: total, completed, failed
    errors: tuple[Mapping[str, Any], ...]
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _errors(value: Any) -> tuple[Mapping[str, Any], ...]:
    """``errors.data``: each error's code, message, line and param, as the provider said them."""
    data = value.get("data") if isinstance(value, dict) else None
    if not isinstance(data, list):
        return ()
    return tuple({name: item.get(name) for name in ("code", "message", "line", "param")}
                 for item in data if isinstance(item, dict))


def provided(payload: Any, backend: str) -> Provided:
    """A provider's answer read as its batch object; one that is not (no ``id``) is the backend's protocol
    failure."""
    if not isinstance(payload, dict) or _text(payload.get("id")) is None:
        raise UpstreamProtocolError(f"Backend '{backend}' answered a batch request with no batch object",
                                    backend=backend)
    status = payload.get("status")
    times = {name: float(payload[name]) for name in TIMES
             if isinstance(payload.get(name), (int, float)) and not isinstance(payload.get(name), bool)}
    counts = payload.get("request_counts")
    return Provided(
        id=payload["id"], status=status if status in STATUSES else None, times=times,
        counts=(_count(counts.get("total")), _count(counts.get("completed")), _count(counts.get("failed")))
        if isinstance(counts, dict) else None,
        errors=_errors(payload.get("errors")), input_file_id=_text(payload.get("input_file_id")),
        output_file_id=_text(payload.get("output_file_id")), error_file_id=_text(payload.get("error_file_id")))


def mapped(batch: Batch, view: Provided) -> Batch:
    """``batch`` as the provider now tells it: status, times, counts and errors (its own ids and file ids
    stay the gateway's)."""
    counts = view.counts or (batch.total, batch.completed, batch.failed)
    return attrs.evolve(batch, status=view.status or batch.status, times={**batch.times, **view.times},
                        total=counts[0], completed=counts[1], failed=counts[2],
                        errors=view.errors or batch.errors, upstream_id=view.id)


def file_facts(payload: Any) -> tuple[int | None, str | None, float | None]:
    """A provider's file object: its size, its filename and when it expires (each None when not said)."""
    if not isinstance(payload, dict):
        return None, None, None
    size, expires = payload.get("bytes"), payload.get("expires_at")
    return (_count(size) if isinstance(size, int) else None, _text(payload.get("filename")),
            float(expires) if isinstance(expires, (int, float)) and not isinstance(expires, bool) else None)
