"""``switchyard usage report``: the usage ledger's totals from the command line.

It opens the store the config names (the same SQLite file or PostgreSQL
database the gateway writes), reads the options with the admin API's rules
(``protocol/admin/usage_query.py``, so both refuse the same things with the
same words) and prints one row per group: a table, JSON (``{"groups": [...]}``
as ``GET /admin/usage`` answers) or CSV (as ``GET /admin/usage.csv``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence, TextIO

from switchyard.actors.ledger.record import RECORD_ENDPOINTS, StoreUnavailable, UsageQuery
from switchyard.config.load import ConfigError, load_file
from switchyard.protocol.admin.usage_format import TOTALS, csv_chunks, group_columns
from switchyard.protocol.admin.usage_query import QueryError, parse_query
from switchyard.protocol.stores import open_store
from switchyard.protocol.stores.sqlite import SqliteStore

AMOUNTS = ("cost", "saved_cost")   # USD totals: None when nothing was priced

FORMATS = ("table", "json", "csv")
# query parameter -> the option that gives it
OPTIONS = {"key": "--key", "org": "--org", "model": "--model", "backend": "--backend", "endpoint": "--endpoint",
           "purpose": "--purpose", "from": "--from", "to": "--to", "group_by": "--group-by"}
PROG = "switchyard usage report"


def add_parser(sub: Any) -> None:
    """``usage report`` under the CLI's subcommands."""
    usage = sub.add_parser("usage", help="usage ledger tools")
    usage_sub = usage.add_subparsers(dest="usage_command", required=True)
    report = usage_sub.add_parser("report", help="totals of the usage ledger the config names, by group")
    report.add_argument("--config", required=True, help="the gateway's config file (its usage.ledger is read)")
    report.add_argument("--from", dest="since", required=True, metavar="TIME",
                        help="first instant, inclusive: 2026-12-01, 2026-12-01T13:00:00Z, +02:00 offsets, Unix seconds")
    report.add_argument("--to", dest="until", required=True, metavar="TIME", help="end instant, exclusive")
    report.add_argument("--group-by", required=True, help="key, org, model, backend, endpoint, day or hour")
    report.add_argument("--key", metavar="KEY_ID", help="only calls made with this API key id")
    report.add_argument("--org", metavar="ORG_ID", help="only calls of this organization id")
    report.add_argument("--model", help="only calls that asked for this model")
    report.add_argument("--backend", help="only calls this backend answered (or last tried)")
    report.add_argument("--endpoint", help=f"only calls to this endpoint: {', '.join(RECORD_ENDPOINTS)}")
    report.add_argument("--purpose", help="client (the default), batch, classifier, web_search, mcp, cache, "
                                          "guardrail or all")
    report.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")


def report_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print the report; 2 for an option that breaks its rule, 1 when the config or the store fails."""
    out = out or sys.stdout
    params = {"key": args.key, "org": args.org, "model": args.model, "backend": args.backend,
              "endpoint": args.endpoint, "purpose": args.purpose, "from": args.since, "to": args.until,
              "group_by": args.group_by}
    try:
        query = parse_query(params)
    except QueryError as exc:
        print(f"{PROG}: {OPTIONS.get(exc.param, exc.param)} {exc.rule}", file=sys.stderr)
        return 2
    try:
        loaded = load_file(args.config)
    except ConfigError as exc:
        for error in exc.errors:
            print(f"error: {error}", file=sys.stderr)
        print(f"{exc.source}: {len(exc.errors)} error(s)", file=sys.stderr)
        return 1
    try:
        groups = read_summary(loaded.snapshot, query)
    except StoreUnavailable as exc:
        print(f"{PROG}: the usage ledger cannot be read: {exc}", file=sys.stderr)
        return 1
    write_report(out, query, groups, args.format)
    return 0


def read_summary(snapshot: Any, query: UsageQuery) -> list[dict[str, Any]]:
    """The store's summary, the store opened for it and closed after. A SQLite file that is not
    there is an error, not an empty ledger made on the spot (a wrong data_dir would report zeros)."""
    store = open_store(snapshot.usage, snapshot.server.data_path())
    if isinstance(store, SqliteStore) and not store.path.exists():
        raise StoreUnavailable(f"no ledger file at {store.path} (usage.ledger: {snapshot.usage.ledger}, "
                               f"server.data_dir: {snapshot.server.data_dir})")
    try:
        store.open()
        return store.summary(query)
    finally:
        store.close()


def write_report(out: TextIO, query: UsageQuery, groups: list[dict[str, Any]], fmt: str) -> None:
    columns = group_columns(query.group_by)
    if fmt == "json":
        print(json.dumps({"groups": groups}, indent=2, ensure_ascii=False), file=out)
    elif fmt == "csv":
        for piece in csv_chunks(columns, groups):
            out.write(piece)
    else:
        out.write(table(columns, groups))


def table(columns: Sequence[str], groups: list[dict[str, Any]]) -> str:
    """Aligned columns, numbers to the right, and a total row under more than one group."""
    rows = [["(none)" if g.get(c) is None and c not in TOTALS else _shown(g.get(c)) for c in columns]
            for g in groups]
    if len(groups) > 1:
        total: dict[str, Any] = {c: sum(g[c] for g in groups) for c in TOTALS if c not in AMOUNTS}
        for c in AMOUNTS:   # None where no group was priced
            amounts = [g[c] for g in groups if g.get(c) is not None]
            total[c] = sum(amounts) if amounts else None
        rows.append(["(total)" if c == columns[0] and c not in TOTALS else _shown(total.get(c)) for c in columns])
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    lines = []
    for cells in [list(columns), *rows]:
        lines.append("  ".join(cell.rjust(w) if columns[i] in TOTALS else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(cells, widths, strict=False))).rstrip())
    return "\n".join(lines) + "\n"


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)
