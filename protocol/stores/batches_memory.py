"""The batch store with ``usage.ledger: memory``: this worker's files and batches, lost at exit.

It keeps the port's every rule (owners, leases, a line finished once), so
what runs on it runs the same on SQLite or PostgreSQL; only sharing and
surviving a restart need those. ``cancelled`` and ``updated`` are the
changes to a batch's row both kinds of store make.
"""

from __future__ import annotations

import threading
from typing import Sequence

import attrs

from switchyard.actors.batches.records import (
    CANCELLED,
    CANCELLING,
    DONE,
    PENDING,
    RUNNABLE,
    TERMINAL,
    VALIDATING,
    Batch,
    Line,
    StoredFile,
)


class MemoryBatchStore:
    name = "memory"
    in_memory = True   # its callers call it in their task, not in a thread (actors/batches/calls.py)

    def __init__(self) -> None:
        self._lock = threading.Lock()    # the methods run in worker threads
        self._files: dict[str, StoredFile] = {}
        self._content: dict[str, bytes] = {}
        self._batches: dict[str, Batch] = {}
        self._lines: dict[str, list[Line]] = {}    # batch id -> its lines by number (from 1)

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def add_file(self, file: StoredFile, content: bytes | None) -> None:
        with self._lock:
            self._files[file.id] = file
            if content is not None:
                self._content[file.id] = content

    def file(self, owner: str | None, file_id: str) -> StoredFile | None:
        with self._lock:
            found = self._files.get(file_id)
        return found if found is not None and owner in (None, found.owner) else None

    def files(self, owner: str, purpose: str | None, after: str | None, limit: int,
              newest_first: bool = True) -> list[StoredFile]:
        with self._lock:
            mine = [f for f in self._files.values() if f.owner == owner and purpose in (None, f.purpose)]
        return _page(mine, after, limit, newest_first)

    def content(self, file_id: str) -> bytes | None:
        with self._lock:
            return self._content.get(file_id)

    def delete_file(self, owner: str, file_id: str) -> bool:
        with self._lock:
            found = self._files.get(file_id)
            if found is None or found.owner != owner:
                return False
            del self._files[file_id]
            self._content.pop(file_id, None)
            return True

    def add_batch(self, batch: Batch, lines: Sequence[Line]) -> None:
        with self._lock:
            self._batches[batch.id] = batch
            self._lines[batch.id] = sorted(lines, key=lambda line: line.number)

    def batch(self, owner: str | None, batch_id: str) -> Batch | None:
        with self._lock:
            found = self._batches.get(batch_id)
        return found if found is not None and owner in (None, found.owner) else None

    def batches(self, owner: str, after: str | None, limit: int) -> list[Batch]:
        with self._lock:
            mine = [b for b in self._batches.values() if b.owner == owner]
        return _page(mine, after, limit, True)

    def cancel(self, owner: str, batch_id: str, at: float) -> Batch | None:
        with self._lock:
            found = self._batches.get(batch_id)
            if found is None or found.owner != owner:
                return None
            if found.status in TERMINAL or found.status == CANCELLING:
                return found
            found = self._batches[batch_id] = cancelled(found, at)
            return found

    def claim(self, worker: str, now: float, until: float) -> Batch | None:
        with self._lock:
            free = [b for b in self._batches.values() if not b.relayed and b.status in RUNNABLE
                    and (b.lease_owner is None or b.lease_until < now)]
            if not free:
                return None
            oldest = min(free, key=lambda b: (b.created_at, b.id))
            taken = attrs.evolve(oldest, lease_owner=worker, lease_until=until)
            self._batches[oldest.id] = taken
            return taken

    def renew(self, batch_id: str, worker: str, until: float) -> Batch | None:
        with self._lock:
            found = self._batches.get(batch_id)
            if found is None or found.lease_owner != worker:
                return None
            found = attrs.evolve(found, lease_until=until)
            self._batches[batch_id] = found
            return found

    def release(self, batch_id: str, worker: str) -> None:
        with self._lock:
            found = self._batches.get(batch_id)
            if found is not None and found.lease_owner == worker:
                self._batches[batch_id] = attrs.evolve(found, lease_owner=None, lease_until=0.0)

    def lines(self, batch_id: str, status: str, after: int, limit: int) -> list[Line]:
        with self._lock:
            every = self._lines.get(batch_id, [])
            return [line for line in every if line.status == status and line.number > after][:limit]

    def finish_line(self, line: Line, worker: str) -> bool:
        with self._lock:
            batch = self._batches.get(line.batch_id)
            every = self._lines.get(line.batch_id)
            if batch is None or every is None or batch.lease_owner != worker:
                return False
            at = line.number - 1
            if not 0 <= at < len(every) or every[at].status != PENDING:
                return False
            every[at] = attrs.evolve(every[at], status=line.status, result=line.result)
            done = line.status == DONE
            self._batches[batch.id] = attrs.evolve(batch, completed=batch.completed + done,
                                                   failed=batch.failed + (not done))
            return True

    def update(self, batch: Batch, worker: str | None) -> bool:
        with self._lock:
            found = self._batches.get(batch.id)
            if found is None or (worker is not None and found.lease_owner != worker):
                return False
            self._batches[batch.id] = updated(found, batch)
            return True

    def update_open(self, batch: Batch) -> bool:
        with self._lock:
            found = self._batches.get(batch.id)
            if found is None or found.status in TERMINAL:
                return False
            self._batches[batch.id] = updated(found, batch)
            return True

    def purge(self, now: float, limit: int) -> int:
        with self._lock:
            gone = [f.id for f in self._files.values() if f.expires_at is not None and f.expires_at <= now][:limit]
            for file_id in gone:
                del self._files[file_id]
                self._content.pop(file_id, None)
            for batch_id, batch in self._batches.items():
                if batch.status in TERMINAL and self._lines.get(batch_id):
                    self._lines[batch_id] = []
            return len(gone)

    def relayed_open(self, limit: int) -> list[Batch]:
        with self._lock:
            open_ = [b for b in self._batches.values() if b.relayed and b.status not in TERMINAL]
        return sorted(open_, key=lambda b: (b.created_at, b.id))[:limit]


def cancelled(found: Batch, at: float) -> Batch:
    """``cancel``'s change to a batch not yet terminal nor cancelling: ``cancelling``, for its runner to stop
    it and write the files of what finished; a gateway-run batch no worker has started (``validating``, its
    lease free or lapsed: nothing of it ran) is ``cancelled`` at once, with no files to write."""
    times = {**found.times, "cancelling_at": at}
    if found.status == VALIDATING and not found.relayed and (found.lease_owner is None or found.lease_until < at):
        return attrs.evolve(found, status=CANCELLED, times={**times, "cancelled_at": at})
    return attrs.evolve(found, status=CANCELLING, times=times)


def updated(found: Batch, batch: Batch) -> Batch:
    """The row ``found`` as ``update(batch)`` leaves it: status, times, file ids, errors, model and relayed ids
    from ``batch``, and a relayed batch's counts (a gateway-run batch's are ``finish_line``'s). A cancel the
    writer had not seen wins over the non-terminal status it writes, and ``cancelling_at`` is kept: a runner
    moving a batch to in_progress just after a client cancelled it must not undo the cancel."""
    counted = batch if found.relayed or batch.relayed else found
    status, times = batch.status, dict(batch.times)
    if found.status == CANCELLING and status not in TERMINAL:
        status = CANCELLING
    if "cancelling_at" in found.times:
        times.setdefault("cancelling_at", found.times["cancelling_at"])
    return attrs.evolve(found, status=status, times=times, output_file_id=batch.output_file_id,
                        error_file_id=batch.error_file_id, errors=batch.errors, model=batch.model,
                        backend=batch.backend, upstream_id=batch.upstream_id, total=counted.total,
                        completed=counted.completed, failed=counted.failed)


def _page(rows: list, after: str | None, limit: int, newest_first: bool) -> list:   # type: ignore[type-arg]
    """Rows in order of creation (ties by id), past the row ``after`` names (none: from the start)."""
    ordered = sorted(rows, key=lambda r: (r.created_at, r.id), reverse=newest_first)
    if after is not None:
        ids = [r.id for r in ordered]
        ordered = ordered[ids.index(after) + 1:] if after in ids else []
    return ordered[:limit]
