"""GET /admin/usage, /admin/usage.csv and /admin/usage/requests/{id} through the ASGI app, read through the
running LedgerActor from its store (usage.ledger: memory); and /admin/stats' by_key and by_model."""

import csv
import io
from typing import Any

import pytest
import trio

from switchyard.actors.ledger.record import LedgerRecord, StoreUnavailable
from switchyard.protocol.stores.memory import MemoryStore
from tests.harness import Reply, chat, gateway, request

TOKEN = "admin-token-0123456789abcdef"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]
CONFIG = f"""
admin: {{token: {TOKEN}}}
health_checks: {{interval: 1h}}
usage: {{ledger: memory}}
backends:
  - {{name: a, type: simulated, models: [demo]}}
"""
DEC_1 = 1796083200.0   # 2026-12-01T00:00:00Z
HOUR = 3600.0


def rec(request_id: str, at: float, **kw: Any) -> LedgerRecord:
    base: dict[str, Any] = dict(request_id=request_id, time=at, key_id="team-a", organization_id="acme",
                                endpoint="chat", model="demo", served_model="demo", backend="a", attempts=1,
                                status=200, error_code=None, input_tokens=10, output_tokens=5, cost=0.01)
    return LedgerRecord(**{**base, **kw})


RECORDS = [
    rec("r1", DEC_1 + 1 * HOUR),
    rec("r2", DEC_1 + 2 * HOUR, key_id="team-b", model="=cmd|' /C calc'!A0", cost=None, input_tokens=7),
    rec("r3", DEC_1 + 3 * HOUR, status=502, error_code="upstream_error", cost=0.02, input_tokens=1,
        output_tokens=0),
    rec("r3", DEC_1 + 3 * HOUR - 1, purpose="classifier", key_id=None, model="tiny", backend="a",
        input_tokens=50, output_tokens=3, cost=0.001),
    rec("r4", DEC_1 + 25 * HOUR, key_id=None, organization_id=None, stream=True, ttfb_ms=12.5),
]


async def get(app, path: str, query: str = "", headers=AUTH, method: str = "GET") -> Reply:
    """One admin request with a query string (the shared harness sends none)."""
    reply = Reply()

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            reply.status, reply.headers = message["status"], dict(message["headers"])
        elif message.get("body"):
            reply.chunks.append((trio.current_time(), message["body"]))

    await app({"type": "http", "method": method, "path": path, "headers": headers,
               "query_string": query.encode()}, receive, send)
    return reply


def with_ledger(app, records=RECORDS) -> MemoryStore:
    """``records`` in the running ledger's store, as its batches would have put them there."""
    store = app.runtime.ledger.store
    assert isinstance(store, MemoryStore)
    store.write(records)
    return store


def store_down(app, monkeypatch) -> None:
    """The ledger's store stops answering queries, the way a locked or lost database does."""
    def down(*args: Any) -> None:
        raise StoreUnavailable("usage.db: database is locked")
    for name in ("summary", "records", "for_request"):
        monkeypatch.setattr(app.runtime.ledger.store, name, down)


def error_of(reply: Reply, status: int) -> dict[str, Any]:
    assert reply.status == status, reply.body
    return reply.json()["error"]


def csv_rows(reply: Reply) -> list[list[str]]:
    assert reply.headers[b"content-type"] == b"text/csv; charset=utf-8"
    return list(csv.reader(io.StringIO(reply.body.decode())))


# --- GET /admin/usage ------------------------------------------------------------------

async def test_usage_groups_are_the_stores_rows_with_cost_a_number_or_null(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        reply = await get(app, "/admin/usage", "group_by=key")
        assert reply.status == 200
        assert reply.json() == {"groups": [
            {"key_id": "team-a", "requests": 2, "errors": 1, "input_tokens": 11, "output_tokens": 5,
             "cost": pytest.approx(0.03), "cache_hits": 0, "saved_cost": None},
            {"key_id": "team-b", "requests": 1, "errors": 0, "input_tokens": 7, "output_tokens": 5, "cost": None,
             "cache_hits": 0, "saved_cost": None},
            {"key_id": None, "requests": 1, "errors": 0, "input_tokens": 10, "output_tokens": 5, "cost": 0.01,
             "cache_hits": 0, "saved_cost": None}]}


async def test_usage_without_group_by_is_one_total_of_client_calls(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        groups = (await get(app, "/admin/usage")).json()["groups"]
        assert [(g["requests"], g["input_tokens"]) for g in groups] == [(4, 28)]


async def test_usage_purpose_all_counts_the_classifier_tries_too(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        everything = (await get(app, "/admin/usage", "purpose=all")).json()["groups"]
        classifier = (await get(app, "/admin/usage", "purpose=classifier&group_by=model")).json()["groups"]
        assert everything[0]["requests"] == 5
        assert classifier == [{"model": "tiny", "requests": 1, "errors": 0, "input_tokens": 50,
                               "output_tokens": 3, "cost": 0.001, "cache_hits": 0, "saved_cost": None}]


async def test_usage_from_is_inclusive_and_to_exclusive(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        reply = await get(app, "/admin/usage", "from=2026-12-01T01:00:00Z&to=2026-12-01T05:00:00%2B02:00"
                                                "&group_by=hour")
        assert [g["hour"] for g in reply.json()["groups"]] == ["2026-12-01T01:00:00Z", "2026-12-01T02:00:00Z"]


async def test_usage_filters_by_key_org_model_and_backend(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        reply = await get(app, "/admin/usage", "key=team-a&org=acme&model=demo&backend=a&group_by=day")
        assert reply.json()["groups"] == [{"day": "2026-12-01", "requests": 2, "errors": 1, "input_tokens": 11,
                                           "output_tokens": 5, "cost": pytest.approx(0.03), "cache_hits": 0,
                                           "saved_cost": None}]


async def test_usage_groups_by_endpoint_and_filters_by_it(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [*RECORDS, rec("r5", DEC_1 + 4 * HOUR, endpoint="embeddings", output_tokens=0, cost=0.5),
                          rec("r6", DEC_1 + 5 * HOUR, endpoint="messages", input_tokens=2, cost=None)])
        groups = (await get(app, "/admin/usage", "group_by=endpoint")).json()["groups"]
        assert [(g["endpoint"], g["requests"], g["input_tokens"], g["output_tokens"]) for g in groups] == [
            ("chat", 4, 28, 15), ("embeddings", 1, 10, 0), ("messages", 1, 2, 5)]
        assert groups[1]["cost"] == 0.5 and groups[2]["cost"] is None
        only = (await get(app, "/admin/usage", "endpoint=embeddings&group_by=key")).json()["groups"]
        assert [(g["key_id"], g["requests"]) for g in only] == [("team-a", 1)]
        rows = csv_rows(await get(app, "/admin/usage.csv", "endpoint=messages"))
        assert [row[0] for row in rows[1:]] == ["r6"]


async def test_usage_unknown_endpoint_is_a_400_naming_the_parameter_and_the_endpoints(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        error = error_of(await get(app, "/admin/usage", "endpoint=chat/completions"), 400)
        assert (error["param"], error["code"]) == ("endpoint", "invalid_parameter")
        assert error["message"].startswith("endpoint must be one of chat, completions, embeddings, ")
        assert error["message"].endswith(", messages, mcp, got 'chat/completions'")


async def test_usage_bad_group_by_is_a_400_naming_the_parameter_and_the_rule(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        error = error_of(await get(app, "/admin/usage", "group_by=week"), 400)
        assert error == {"message": "group_by must be one of key, org, model, backend, endpoint, day, hour, "
                                    "got 'week'",
                         "type": "invalid_request_error", "param": "group_by", "code": "invalid_parameter"}


async def test_usage_bad_time_is_a_400(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        error = error_of(await get(app, "/admin/usage", "from=2026-12-02&to=2026-12-01"), 400)
        assert error["param"] == "from" and error["message"].startswith("from must be earlier than to")


async def test_usage_unknown_parameter_is_a_400(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        error = error_of(await get(app, "/admin/usage", "limit=5"), 400)   # limit belongs to the CSV listing
        assert (error["param"], error["code"]) == ("limit", "unknown_parameter")


async def test_usage_repeated_parameter_is_a_400(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        error = error_of(await get(app, "/admin/usage", "key=a&key=b"), 400)
        assert (error["param"], error["code"]) == ("key", "duplicate_parameter")


async def test_usage_needs_the_admin_token(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        assert (await get(app, "/admin/usage", headers=[])).status == 401


async def test_usage_when_the_store_cannot_answer_is_a_503_saying_why(autojump_clock, monkeypatch):
    async with gateway(CONFIG) as app:
        store_down(app, monkeypatch)
        for path in ("/admin/usage", "/admin/usage.csv", "/admin/usage/requests/r1"):
            error = error_of(await get(app, path), 503)
            assert error["message"] == "The usage ledger's store is unavailable: usage.db: database is locked"
            assert error["code"] == "usage_ledger_unavailable"


# --- GET /admin/usage/requests/{id} ----------------------------------------------------

async def test_request_record_has_every_field_but_record_id_and_its_classifier_tries(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        body = (await get(app, "/admin/usage/requests/r3")).json()
        assert "record_id" not in body
        assert body["time"] == "2026-12-01T03:00:00.000Z"
        assert (body["status"], body["error_code"], body["purpose"], body["cost"]) == \
            (502, "upstream_error", "client", 0.02)
        [tried] = body["classifier"]
        assert (tried["model"], tried["time"], tried["purpose"]) == ("tiny", "2026-12-01T02:59:59.000Z",
                                                                    "classifier")
        assert "record_id" not in tried


async def test_request_record_without_classifier_tries_has_an_empty_list(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        body = (await get(app, "/admin/usage/requests/r4")).json()
        assert (body["classifier"], body["key_id"], body["stream"], body["ttfb_ms"]) == ([], None, True, 12.5)


async def test_request_record_unknown_is_a_404(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        error = error_of(await get(app, "/admin/usage/requests/nope"), 404)
        assert (error["code"], error["type"]) == ("usage_record_not_found", "not_found_error")
        assert error["message"].startswith("No usage record for request id 'nope'")


async def test_request_record_is_read_only(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        reply = await get(app, "/admin/usage/requests/r1", method="DELETE")
        assert reply.status == 405 and reply.headers[b"allow"] == b"GET"


# --- GET /admin/usage.csv --------------------------------------------------------------

async def test_csv_lists_records_oldest_first_with_a_header_and_no_record_id(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        reply = await get(app, "/admin/usage.csv")
        assert reply.status == 200
        header, *rows = csv_rows(reply)
        assert header[:3] == ["request_id", "time", "key_id"] and "record_id" not in header
        assert [r[0] for r in rows] == ["r1", "r2", "r3", "r4"]
        first = dict(zip(header, rows[0], strict=False))
        assert (first["time"], first["cost"], first["stream"], first["ttfb_ms"]) == \
            ("2026-12-01T01:00:00.000Z", "0.01", "false", "")


async def test_csv_defuses_a_client_chosen_value_a_spreadsheet_would_run(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        header, *rows = csv_rows(await get(app, "/admin/usage.csv", "key=team-b"))
        assert dict(zip(header, rows[0], strict=False))["model"] == "'=cmd|' /C calc'!A0"


async def test_csv_limit_keeps_the_oldest(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        _, *rows = csv_rows(await get(app, "/admin/usage.csv", "limit=2&purpose=all"))
        assert [r[0] for r in rows] == ["r1", "r2"]


async def test_csv_limit_out_of_range_is_a_400(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        error = error_of(await get(app, "/admin/usage.csv", "limit=1000001"), 400)
        assert error["message"] == "limit must be a whole number from 1 to 1000000, got '1000001'"


async def test_csv_with_group_by_is_one_row_per_group(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        rows = csv_rows(await get(app, "/admin/usage.csv", "group_by=day"))
        assert rows == [["day", "requests", "errors", "input_tokens", "output_tokens", "cost", "cache_hits",
                         "saved_cost"],
                        ["2026-12-01", "3", "1", "18", "10", "0.03", "0", ""],
                        ["2026-12-02", "1", "0", "10", "5", "0.01", "0", ""]]


async def test_csv_of_many_records_arrives_in_pieces(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(f"r{i}", DEC_1 + i) for i in range(5000)])
        reply = await get(app, "/admin/usage.csv")
        assert len(reply.chunks) > 1 and len(csv_rows(reply)) == 5001


# --- GET /admin/stats ------------------------------------------------------------------

async def test_stats_show_client_calls_by_key_and_by_model_from_the_ledger(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app)
        body = (await get(app, "/admin/stats")).json()
        assert "by_purpose" in body
        assert [(g["key_id"], g["requests"]) for g in body["by_key"]] == [("team-a", 2), ("team-b", 1), (None, 1)]
        assert [(g["model"], g["requests"], g["errors"]) for g in body["by_model"]] == \
            [("=cmd|' /C calc'!A0", 1, 0), ("demo", 3, 1)]


async def test_stats_when_the_store_cannot_answer_keep_by_purpose_and_say_why(autojump_clock, monkeypatch):
    async with gateway(CONFIG) as app:
        store_down(app, monkeypatch)
        body = (await get(app, "/admin/stats")).json()
        assert (body["by_key"], body["by_model"], "by_purpose" in body) == (None, None, True)
        assert body["ledger_error"] == "usage.db: database is locked"


async def test_a_served_call_is_found_by_the_request_id_its_client_got(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        request_id = reply.headers[b"x-continuum-request-id"].decode()
        await app.runtime.ledger.flush()
        body = (await get(app, f"/admin/usage/requests/{request_id}")).json()
        assert (body["request_id"], body["model"], body["backend"], body["status"]) == (request_id, "demo", "a", 200)
        assert body["classifier"] == []
