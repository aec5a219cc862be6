"""How ledger rows look outside (protocol/admin/usage_format.py): RFC 3339 times, CSV cells."""

import csv
import io

from switchyard.actors.ledger.record import FIELDS, LedgerRecord
from switchyard.protocol.admin.usage_format import RECORD_COLUMNS, csv_cell, csv_chunks, record_view, rfc3339


def record(**kw):
    base = dict(request_id="r1", time=1796130000.25, key_id="k", organization_id=None, endpoint="chat",
                model="m", served_model="m", backend="b", attempts=1, status=200, error_code=None)
    return LedgerRecord(**{**base, **kw})


def test_times_are_rfc3339_utc_with_milliseconds():
    assert rfc3339(1796130000.25) == "2026-12-01T13:00:00.250Z"


def test_a_record_shows_every_field_but_its_record_id_and_route_events():
    view = record_view(record())
    assert list(view) == [f for f in FIELDS if f not in ("record_id", "route_events")] == list(RECORD_COLUMNS)
    assert view["time"] == "2026-12-01T13:00:00.250Z"


def test_a_cell_a_spreadsheet_would_run_as_a_formula_gets_a_leading_quote():
    for text in ("=HYPERLINK(1)", "+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        assert csv_cell(text) == "'" + text
    assert csv_cell("gpt-4o") == "gpt-4o" and csv_cell(-1.5) == -1.5   # numbers are numbers


def test_none_is_an_empty_cell_and_booleans_are_words():
    assert (csv_cell(None), csv_cell(True), csv_cell(False)) == ("", "true", "false")


def test_csv_comes_in_pieces_that_join_into_one_table():
    rows = [{"a": i, "b": f"x{i}"} for i in range(5)]
    pieces = list(csv_chunks(("a", "b"), rows, chunk_rows=2))
    assert len(pieces) == 3
    assert list(csv.reader(io.StringIO("".join(pieces)))) == [["a", "b"]] + [[str(i), f"x{i}"] for i in range(5)]


def test_csv_of_nothing_is_its_header():
    assert list(csv_chunks(("a", "b"), [])) == ["a,b\r\n"]
