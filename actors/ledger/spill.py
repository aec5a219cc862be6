"""The ledger's spill file: records the store has not taken yet, one JSON object a line.

While the store is away (or the queue overflows) the LedgerActor appends each
batch here, flushed and fsync'd before it counts as spilled, so a crash after
that loses nothing. Once the store takes records again they are read back in
chunks and written (the store skips a record_id it has, so a replay a crash
cut short repeats safely); the file is removed only after the store took all
of it. A line that is not a whole record (a ``kill -9`` tore it mid-write, or
something else wrote it) is handed back as it is, for the quarantine file;
it never stops the lines after it.

The file is bounded (``usage.spill_max_bytes``, ``usage.spill_max_age``): an
append that would pass the size first drops what was already replayed and
the records older than the age (rewriting the file), then takes what still
fits; the rest is refused and counted by the actor. A replay skips records
older than the age.

Blocking file I/O: the actor runs these in a worker thread, one call at a time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import BinaryIO, Iterator, Sequence

from attrs import frozen

from switchyard.actors.ledger.record import LedgerRecord

NAME = "usage-spill.jsonl"   # under server.data_dir
UNBOUNDED = 1 << 62


@frozen
class Chunk:
    """What was read back from ``offset`` up to ``end``."""

    records: tuple[LedgerRecord, ...]
    end: int                       # the offset after the last line read: where the next read starts
    corrupt: tuple[bytes, ...]     # lines that are not a whole record, as read
    expired: int                   # records older than the age bound, skipped
    done: bool                     # ``end`` is the end of the file


@frozen
class Appended:
    appended: int    # records now in the file
    refused: int     # records that did not fit under the size bound (the last ones)
    expired: int     # records older than the age bound dropped to make room
    compacted: bool  # the file was rewritten: what was before the replay offset is gone (read from 0 again)
    size: int        # the file's size now, bytes


class SpillFile:
    def __init__(self, path: Path, max_bytes: int = UNBOUNDED) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes

    def exists(self) -> bool:
        return self.path.exists()

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def append(self, records: Sequence[LedgerRecord], keep_from: int = 0, oldest: float | None = None) -> Appended:
        """Add ``records`` (as many as fit under ``max_bytes``) and make them durable (flush, fsync) before
        returning. When they do not all fit, the file is first rewritten without its lines before
        ``keep_from`` (replayed already) and its records older than ``oldest``."""
        lines = [_line(rec) for rec in records]
        size = self.size()
        expired, compacted = 0, False
        if size + sum(map(len, lines)) > self.max_bytes and self._can_free(keep_from, oldest):
            expired, size = self._compact(keep_from, oldest)
            compacted = True
        fit: list[bytes] = []
        for line in lines:
            if size + len(line) + 1 > self.max_bytes:   # + 1: a newline a torn last line may need
                break
            fit.append(line)
            size += len(line)
        if fit:
            size = self._write(b"".join(fit))
        return Appended(len(fit), len(lines) - len(fit), expired, compacted, size)

    def _write(self, lines: bytes) -> int:
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
            size = f.tell()
        if created:
            fsync_dir(self.path.parent)   # the file's name is durable too, not only its bytes
        return size

    def _can_free(self, keep_from: int, oldest: float | None) -> bool:
        """Whether a rewrite frees anything: lines already replayed, or a first record past the age (records
        are appended about in time order; a full file that can free nothing is not rewritten for nothing)."""
        if keep_from > 0:
            return True
        if oldest is None:
            return False
        with open(self.path, "rb") as f:
            first = next(_lines(f, 0), None)
        rec = _parse(first) if first is not None else None
        return rec is not None and rec.time < oldest

    def _compact(self, keep_from: int, oldest: float | None) -> tuple[int, int]:
        """Rewrite the file with its lines from ``keep_from`` on, less the records older than ``oldest``
        (lines that are not records stay, for the quarantine); (records dropped, the new size)."""
        expired = 0
        tmp = self.path.with_name(self.path.name + ".compact")
        with open(self.path, "rb") as src, open(tmp, "wb") as out:
            for line in _lines(src, keep_from):
                rec = _parse(line)
                if rec is not None and oldest is not None and rec.time < oldest:
                    expired += 1
                    continue
                out.write(line if line.endswith(b"\n") else line + b"\n")
            out.flush()
            os.fsync(out.fileno())
            size = out.tell()
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        return expired, size

    def read(self, offset: int, limit: int, oldest: float | None = None) -> Chunk:
        """Up to ``limit`` records from ``offset`` (records older than ``oldest`` are skipped and counted);
        a missing file reads as empty."""
        records: list[LedgerRecord] = []
        corrupt: list[bytes] = []
        expired = 0
        end = offset
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return Chunk((), offset, (), 0, True)
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
                    corrupt.append(line.rstrip(b"\n"))
                elif oldest is not None and rec.time < oldest:
                    expired += 1
                else:
                    records.append(rec)
            size = os.fstat(f.fileno()).st_size
        return Chunk(tuple(records), end, tuple(corrupt), expired, end >= size)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _lines(f: BinaryIO, offset: int) -> Iterator[bytes]:
    f.seek(offset)
    for line in f:
        if line.strip():
            yield line


def _line(rec: LedgerRecord) -> bytes:
    return json.dumps(rec.to_dict(), separators=(",", ":")).encode() + b"\n"


def _parse(line: bytes) -> LedgerRecord | None:
    try:
        data = json.loads(line)
        return LedgerRecord.from_dict(data) if isinstance(data, dict) else None
    except Exception:   # cut mid-object, not a record's fields, a field of the wrong type: not a record
        return None


def fsync_dir(path: Path) -> None:
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
