"""How ledger rows look outside the gateway: JSON objects with RFC 3339 times, and CSV text.

Shared by the admin API and ``switchyard usage report``. Keys, models and
backends are chosen by clients and operators, so a CSV cell that a
spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, a tab or a
carriage return first) is written with a leading ``'``.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Sequence

from switchyard.actors.ledger.record import FIELDS, GROUP_FIELDS, LedgerRecord

# the store's key stays inside; route events are JSON of their own (in a record's view, not in CSV)
RECORD_COLUMNS = tuple(name for name in FIELDS if name not in ("record_id", "route_events"))
TOTALS = ("requests", "errors", "input_tokens", "output_tokens", "cost", "cache_hits", "saved_cost")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CHUNK_ROWS = 2000        # CSV rows per piece of a streamed answer


def rfc3339(seconds: float) -> str:
    """``2026-12-01T13:00:00.250Z``: UTC, milliseconds."""
    when = datetime.fromtimestamp(seconds, timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record_view(rec: LedgerRecord) -> dict[str, Any]:
    """Every field of ``rec`` but ``record_id`` and ``route_events``; ``time`` as RFC 3339."""
    out = {name: getattr(rec, name) for name in RECORD_COLUMNS}
    out["time"] = rfc3339(rec.time)
    return out


def group_columns(group_by: str | None) -> tuple[str, ...]:
    """A summary row's columns: its group field (none without ``group_by``), then the totals."""
    if group_by is None:
        return TOTALS
    return (GROUP_FIELDS.get(group_by, group_by), *TOTALS)


def csv_cell(value: Any) -> Any:
    """A value as a CSV cell: None empty, booleans ``true``/``false``, text defused (see the module)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_chunks(columns: Sequence[str], rows: Iterable[dict[str, Any]], chunk_rows: int = CHUNK_ROWS
               ) -> Iterator[str]:
    """The CSV text of ``rows`` (their ``columns``, a header row first), in pieces of ``chunk_rows`` rows,
    so a long listing is sent while the rest is still being written."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(columns)
    count = 0
    for row in rows:
        writer.writerow([csv_cell(row.get(name)) for name in columns])
        count += 1
        if count % chunk_rows == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    tail = buffer.getvalue()
    if tail or count == 0:
        yield tail
