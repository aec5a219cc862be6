"""The ledger's spill file: records the store has not taken yet, one JSON object a line.

While the store is away (or the queue overflows) the LedgerActor appends each
batch here, flushed and fsync'd before it counts as spilled, so a crash after
that loses nothing. Once the store takes records again they are read back in
chunks and written (the store skips a record_id it has, so a replay a crash
cut short repeats safely); the file is removed only after the store took all
of it. A line a ``kill -9`` tore mid-write is skipped and counted, never fatal.

Blocking file I/O: the actor runs these in a worker thread, one call at a time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

from attrs import frozen

from switchyard.actors.ledger.record import LedgerRecord

NAME = "usage-spill.jsonl"   # under server.data_dir


@frozen
class Chunk:
    """Records read back from ``offset`` up to ``end``."""

    records: tuple[LedgerRecord, ...]
    end: int      # the offset after the last line read: where the next read starts
    torn: int     # lines skipped because they are not a whole record
    done: bool    # ``end`` is the end of the file


class SpillFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.exists()

    def append(self, records: Sequence[LedgerRecord]) -> None:
        """Add ``records`` and make them durable (flush, fsync) before returning."""
        lines = b"".join(_line(rec) for rec in records)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        with open(self.path, "a+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    lines = b"\n" + lines   # a torn last line must not swallow the first new record
            f.write(lines)   # appended: "a" mode writes at the end whatever was read
            f.flush()
            os.fsync(f.fileno())
        if created:
            _fsync_dir(self.path.parent)   # the file's name is durable too, not only its bytes

    def read(self, offset: int, limit: int) -> Chunk:
        """Up to ``limit`` records from ``offset``; a missing file reads as empty."""
        records: list[LedgerRecord] = []
        torn = 0
        end = offset
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return Chunk((), offset, 0, True)
        with f:
            f.seek(offset)
            while len(records) < limit:
                line = f.readline()
                if not line:
                    break
                end += len(line)
                if not line.strip():
                    continue
                rec = _parse(line)
                if rec is None:
                    torn += 1
                else:
                    records.append(rec)
            size = os.fstat(f.fileno()).st_size
        return Chunk(tuple(records), end, torn, end >= size)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _line(rec: LedgerRecord) -> bytes:
    return json.dumps(rec.to_dict(), separators=(",", ":")).encode() + b"\n"


def _parse(line: bytes) -> LedgerRecord | None:
    try:
        data = json.loads(line)
        return LedgerRecord.from_dict(data) if isinstance(data, dict) else None
    except (ValueError, TypeError):   # cut mid-object, or not a record's fields
        return None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return   # a platform that cannot open a directory: the data itself is synced
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
