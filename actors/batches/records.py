"""A file, a batch and a batch's line as the batch store keeps them (``store.py``'s port).

Every row names its ``owner`` (``response_owners.owner_of`` of the key that
made it): a key sees only its own files and batches. A batch the gateway runs
itself holds a lease (``lease_owner`` until ``lease_until``, Unix seconds):
the one worker of the fleet that runs its lines, taken over by another when
it lapses. A relayed batch (``backend`` set) is the provider's to run; the
row maps its ids to the provider's (``upstream_id``).
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs
from attrs import frozen

# file purposes: what a client uploads, and what the gateway writes
INPUT, OUTPUT = "batch", "batch_output"

# batch statuses, as OpenAI names them
VALIDATING, IN_PROGRESS, FINALIZING, COMPLETED = "validating", "in_progress", "finalizing", "completed"
FAILED, EXPIRED, CANCELLING, CANCELLED = "failed", "expired", "cancelling", "cancelled"
TERMINAL = frozenset({COMPLETED, FAILED, EXPIRED, CANCELLED})
RUNNABLE = frozenset({VALIDATING, IN_PROGRESS, FINALIZING, CANCELLING})   # a gateway-run batch a worker claims

# line statuses
PENDING, DONE, ERROR = "pending", "done", "error"


@frozen
class StoredFile:
    id: str                          # file-<24 hex>
    owner: str                       # the key id that uploaded it (or whose batch wrote it)
    purpose: str                     # batch | batch_output
    filename: str
    bytes: int
    created_at: float                # Unix seconds
    expires_at: float | None = None
    backend: str | None = None       # a relayed batch's file: the backend that holds it
    upstream_id: str | None = None   # ... and its id there
    lines: int = 0                   # an input file's requests (validated at upload)

    def body(self) -> dict[str, Any]:
        """The openai SDK's ``FileObject``."""
        return {"id": self.id, "object": "file", "bytes": self.bytes, "created_at": int(self.created_at),
                "filename": self.filename, "purpose": self.purpose, "status": "processed",
                "expires_at": None if self.expires_at is None else int(self.expires_at), "status_details": None}


@frozen
class Line:
    """One request of a batch: its place in the input file (from 1), the client's ``custom_id``, and the
    request's ``url`` and ``body`` (JSON text, as uploaded)."""

    batch_id: str
    number: int
    custom_id: str
    url: str
    body: str
    status: str = PENDING            # pending | done (a 2xx answer) | error (any other answer, or never run)
    result: str | None = None        # the output or error file's line (JSON text), once finished


@frozen
class Batch:
    id: str                          # batch_<24 hex>
    owner: str
    endpoint: str                    # /v1/chat/completions | /v1/embeddings | ...
    input_file_id: str
    completion_window: str           # 24h
    status: str
    created_at: float
    expires_at: float                # created_at + the window: lines not done by then expire
    total: int = 0
    completed: int = 0
    failed: int = 0
    metadata: Mapping[str, str] = attrs.field(factory=dict)
    model: str | None = None         # the model every line names, when they all name one
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: tuple[Mapping[str, Any], ...] = ()   # a failed batch's reasons: {code, message, line, param}
    # the instants of each status reached (Unix seconds): in_progress_at, finalizing_at, completed_at, ...
    times: Mapping[str, float] = attrs.field(factory=dict)
    backend: str | None = None       # relayed: the OpenAI or Azure backend that runs it
    upstream_id: str | None = None   # ... and its id there
    lease_owner: str | None = None   # gateway-run: the worker running it
    lease_until: float = 0.0

    @property
    def relayed(self) -> bool:
        return self.backend is not None

    def body(self) -> dict[str, Any]:
        """The openai SDK's ``Batch``."""
        at = {name: (int(self.times[name]) if name in self.times else None) for name in (
            "in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
            "cancelled_at")}
        return {"id": self.id, "object": "batch", "endpoint": self.endpoint, "model": self.model,
                "errors": {"object": "list", "data": [dict(e) for e in self.errors]} if self.errors else None,
                "input_file_id": self.input_file_id, "completion_window": self.completion_window,
                "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                "created_at": int(self.created_at), "expires_at": int(self.expires_at), **at,
                "request_counts": {"total": self.total, "completed": self.completed, "failed": self.failed},
                "metadata": dict(self.metadata) or None}
