"""The batch store's port: files, batches and their lines in the usage ledger's database.

Implementations: ``protocol/stores/batches.py`` (SQLite, PostgreSQL: every
worker and instance sharing the ledger shares them, and they survive a
restart) and ``protocol/stores/batches_memory.py`` (``usage.ledger: memory``:
this worker's, lost at exit). Every method blocks (callers run it in a worker
thread) and may raise ``StoreUnavailable``. Reads that take an ``owner`` see
only that owner's rows: a key never learns of another key's file or batch.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from switchyard.actors.batches.records import Batch, Line, StoredFile


class BatchStore(Protocol):
    name: str

    def open(self) -> None: ...

    def close(self) -> None: ...

    # --- files --------------------------------------------------------------------

    def add_file(self, file: StoredFile, content: bytes | None) -> None:
        """Keep ``file`` with its ``content`` (None: a relayed file, whose content its backend holds); a file of
        the same id is replaced (a batch's output file written again by the worker that took it over)."""
        ...

    def file(self, owner: str | None, file_id: str) -> StoredFile | None:
        """The file, if ``owner``'s (None: whoever's) and not deleted."""
        ...

    def files(self, owner: str, purpose: str | None, after: str | None, limit: int,
              newest_first: bool = True) -> list[StoredFile]:
        """Up to ``limit`` of ``owner``'s files (of ``purpose``, if given), in order of creation, starting
        past the file ``after`` names."""
        ...

    def content(self, file_id: str) -> bytes | None:
        """A kept file's bytes; None when the gateway does not hold them (a relayed file)."""
        ...

    def delete_file(self, owner: str, file_id: str) -> bool:
        """Delete ``owner``'s file and its content; False when there was none."""
        ...

    # --- batches ------------------------------------------------------------------

    def add_batch(self, batch: Batch, lines: Sequence[Line]) -> None:
        """Keep ``batch`` and its lines, in one transaction."""
        ...

    def batch(self, owner: str | None, batch_id: str) -> Batch | None:
        """The batch, if ``owner``'s (None: whoever's), its counts as they are now."""
        ...

    def batches(self, owner: str, after: str | None, limit: int) -> list[Batch]:
        """Up to ``limit`` of ``owner``'s batches, newest first, starting past the batch ``after`` names."""
        ...

    def cancel(self, owner: str, batch_id: str, at: float) -> Batch | None:
        """Ask ``owner``'s batch to stop: one not yet terminal nor cancelling becomes ``cancelling``
        (``cancelling_at`` = ``at``), for its runner to end; a gateway-run batch still ``validating`` whose lease
        is free or lapsed (nothing of it ran) becomes ``cancelled`` at once. The batch as it then is, None when
        there is no such batch."""
        ...

    # --- the workers that run batches ---------------------------------------------

    def claim(self, worker: str, now: float, until: float) -> Batch | None:
        """The oldest batch the gateway runs (not relayed; status in ``RUNNABLE``) whose lease is free or
        lapsed before ``now``, leased to ``worker`` until ``until``: of workers claiming together, one wins."""
        ...

    def renew(self, batch_id: str, worker: str, until: float) -> Batch | None:
        """``worker``'s lease extended to ``until``; the batch as it now is (a cancel shows in it), None
        when the lease is no longer ``worker``'s."""
        ...

    def release(self, batch_id: str, worker: str) -> None:
        """Give the lease up (if ``worker``'s), so another worker may claim the batch at once."""
        ...

    def lines(self, batch_id: str, status: str, after: int, limit: int) -> list[Line]:
        """Up to ``limit`` lines of ``status``, numbered past ``after``, in order."""
        ...

    def finish_line(self, line: Line, worker: str) -> bool:
        """Write the line's status (done or error) and result, and count it in the batch's ``completed`` or
        ``failed``, in one transaction; only while ``worker`` holds the batch's lease and the line is still
        pending. True when this write made it: a line is finished once, whoever else ran it."""
        ...

    def update(self, batch: Batch, worker: str | None) -> bool:
        """Write the batch's status, times, file ids, errors, model and relayed ids, and a relayed batch's
        counts (a gateway-run batch's are ``finish_line``'s); with ``worker``, only while it holds the lease.
        A batch cancelling stays so unless ``batch`` is terminal, and keeps its ``cancelling_at`` (a cancel
        the writer had not seen yet is never undone). True when written."""
        ...

    def update_open(self, batch: Batch) -> bool:
        """``update(batch, None)``, only while the stored batch is not yet terminal (one conditional write:
        ``UPDATE ... WHERE id = ? AND status NOT IN (<TERMINAL>)``). True when written. A relayed batch's
        provider view is written this way: a late, older view never overwrites a batch that has ended, and
        of workers that saw it end together exactly one moves it to terminal, and so alone registers its
        output files and writes its ledger records (``relay.py``)."""
        ...

    def purge(self, now: float, limit: int) -> int:
        """Delete up to ``limit`` files whose ``expires_at`` is past (their content too), and the lines of
        terminal batches (their results are in the batch's files); how many files went. Idempotent: every
        worker may purge."""
        ...

    def relayed_open(self, limit: int) -> list[Batch]:
        """Up to ``limit`` relayed batches not yet terminal, oldest first (their providers are asked how
        they are doing)."""
        ...
