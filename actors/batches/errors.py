"""The Files and Batch APIs' own answers: an id this key cannot see, and a store that is away."""

from __future__ import annotations

from switchyard.actors.errors import ClientError, Unavailable


class FileNotFound(ClientError):
    """The one answer for an unknown, deleted or another key's file id (OpenAI's words)."""

    status = 404
    code = "not_found"


class BatchNotFound(ClientError):
    """The one answer for an unknown or another key's batch id."""

    status = 404
    code = "not_found"


class BatchesUnavailable(Unavailable):
    """The store of files and batches (the usage ledger's database, or its files' directory) did not answer
    within its deadlines: retry shortly, nothing was changed half-way."""

    code = "batches_unavailable"


def no_file(file_id: str, param: str = "file_id") -> FileNotFound:
    return FileNotFound(f"No such File object: {file_id}", param=param)


def no_batch(batch_id: str) -> BatchNotFound:
    return BatchNotFound(f"No such Batch object: {batch_id}", param="batch_id")
