"""The ledger's quarantine file: what the store refused while it was answering, kept for a person to read.

A record the store cannot take (a value it cannot encode, a number out of
its range) once failed its whole batch, and the spill replay retried that
record first for ever: every later record went to the spill file and none
to the database. Now the LedgerActor retries a failed batch one record at a
time, and a record the store still refuses while it takes others comes
here, with the store's reason; so does a spill-file line that is not a
whole record. Nothing here is replayed by itself: a record fixed by hand can
be appended to the spill file, which the next start replays.

One JSON object a line: ``quarantined_at`` (Unix seconds), ``reason``, and
``record`` (the record's fields) or ``line`` (the spill-file line as text,
bytes that are not UTF-8 escaped). Bounded by ``usage.spill_max_bytes``;
past it an entry is refused and the actor counts it as dropped.

Blocking file I/O: the actor runs it in a worker thread, one call at a time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from switchyard.actors.ledger.record import LedgerRecord
from switchyard.actors.ledger.spill import UNBOUNDED, fsync_dir

NAME = "usage-quarantine.jsonl"   # under server.data_dir, beside the spill file


def record_entry(rec: LedgerRecord, reason: str, now: float) -> dict[str, Any]:
    return {"quarantined_at": now, "reason": reason, "record": rec.to_dict()}


def line_entry(line: bytes, reason: str, now: float) -> dict[str, Any]:
    return {"quarantined_at": now, "reason": reason, "line": line.decode("utf-8", "backslashreplace")}


class QuarantineFile:
    def __init__(self, path: Path, max_bytes: int = UNBOUNDED) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes

    def add(self, entries: Sequence[dict[str, Any]]) -> int:
        """Append ``entries`` (as many as fit under ``max_bytes``), durable before returning; how many."""
        lines: list[bytes] = []
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        for entry in entries:
            # ensure_ascii: a value no encoder took still writes (as its \\u escape)
            line = json.dumps(entry, separators=(",", ":"), default=repr).encode() + b"\n"
            if size + len(line) > self.max_bytes:
                break
            lines.append(line)
            size += len(line)
        if not lines:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        with open(self.path, "ab") as f:
            f.write(b"".join(lines))
            f.flush()
            os.fsync(f.fileno())
        if created:
            fsync_dir(self.path.parent)
        return len(lines)
