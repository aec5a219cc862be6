"""Route events kept in the usage ledger (docs/failover.md#get-adminrequestsidevents): every call but one
clean attempt keeps them, so the events of a call another worker or instance served can still be read."""

from __future__ import annotations

import json
import sqlite3

from switchyard.actors.ledger.record import LedgerRecord, UsageQuery
from switchyard.protocol.stores import migrations
from switchyard.protocol.stores.sqlite import SqliteStore
from tests.harness import chat, gateway, request

TOKEN = "route-events-admin-token-0123"
ADMIN = [(b"authorization", f"Bearer {TOKEN}".encode())]
CONFIG = f"""
admin: {{token: "{TOKEN}"}}
usage: {{ledger: memory}}
health_checks: {{interval: 1h}}
retry: {{max_attempts: 1}}
fallback:
  enabled: true
  fallback_chains: {{big: [small]}}
backends:
  - {{name: broken, type: simulated, models: [big, solo], simulation: {{latency: 10ms, failure: {{status: 503}}}}}}
  - {{name: good, type: simulated, models: [small], simulation: {{latency: 10ms, chunks: 2}}}}
"""


async def kept(app, request_id: str) -> LedgerRecord:
    await app.runtime.ledger.flush()
    [rec] = [r for r in app.runtime.ledger.store.records(UsageQuery(), 100) if r.request_id == request_id]
    return rec


def request_id(reply) -> str:
    return reply.headers[b"x-continuum-request-id"].decode()


async def test_a_call_that_fell_back_keeps_its_route_events_in_its_record(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        assert reply.status == 200
        rid = request_id(reply)
        rec = await kept(app, rid)
        assert rec.route_events is not None
        assert json.loads(rec.route_events) == app.runtime.traces.get(rid).as_dict()
        assert [e["event"] for e in json.loads(rec.route_events)["events"]] == [
            "accepted", "selected", "attempt_failed", "route_changed", "selected", "completed"]


async def test_one_clean_attempt_keeps_no_route_events(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("small"))
        assert reply.status == 200
        assert (await kept(app, request_id(reply))).route_events is None


async def test_one_attempt_that_failed_keeps_its_route_events(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("solo"))   # no chain: one failed try
        assert reply.status == 503
        rec = await kept(app, request_id(reply))
        assert json.loads(rec.route_events)["terminal_status"] == "failed"


async def test_events_come_from_the_ledger_when_this_worker_does_not_hold_them(autojump_clock):
    async with gateway(CONFIG) as app:
        rid = request_id(await request(app, "POST", "/v1/chat/completions", chat("big")))
        in_memory = (await request(app, "GET", f"/admin/requests/{rid}/events", headers=ADMIN)).json()
        assert in_memory["source"] == "worker"
        await app.runtime.ledger.flush()
        app.runtime.traces._traces.clear()   # as another worker would see it: not in its memory
        reply = await request(app, "GET", f"/admin/requests/{rid}/events", headers=ADMIN)
        assert reply.status == 200
        from_ledger = reply.json()
        assert from_ledger["source"] == "ledger"
        assert {**from_ledger, "source": "worker"} == in_memory


async def test_a_clean_call_this_worker_does_not_hold_is_404_saying_why(autojump_clock):
    async with gateway(CONFIG) as app:
        rid = request_id(await request(app, "POST", "/v1/chat/completions", chat("small")))
        await app.runtime.ledger.flush()
        app.runtime.traces._traces.clear()
        reply = await request(app, "GET", f"/admin/requests/{rid}/events", headers=ADMIN)
        assert reply.status == 404
        error = reply.json()["error"]
        assert error["code"] == "request_not_found"
        assert "one clean attempt" in error["message"]


def test_a_ledger_of_an_older_schema_gains_the_column_and_keeps_its_records(tmp_path):
    path = tmp_path / "usage.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at double precision NOT NULL)")
    for version, statements in enumerate(migrations.SQLITE[:2], start=1):
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, 0)", (version,))
    # the record as that schema holds it: its own columns only (later migrations add route_events and more)
    table = {row[1] for row in conn.execute("PRAGMA table_info(usage_records)")}
    assert "route_events" not in table and "cache_hit" not in table
    given = {"request_id": "req_old", "time": 1.0, "endpoint": "chat", "model": "demo", "served_model": "demo",
             "backend": "a", "attempts": 1, "status": 200, "input_tokens": 1, "output_tokens": 1, "cached_tokens": 0,
             "reasoning_tokens": 0, "estimated": 0,
             "latency_ms": 5.0, "ttfb_ms": 4.0, "stream": 0, "purpose": "client", "record_id": "r-old"}
    assert set(given) <= table
    conn.execute(f"INSERT INTO usage_records ({', '.join(given)}) VALUES ({', '.join('?' * len(given))})",
                 tuple(given.values()))
    conn.commit()
    conn.close()
    store = SqliteStore(path)
    store.open()
    try:
        [old] = store.for_request("req_old")
        assert (old.route_events, old.cache_hit, old.guardrails, old.model) == (None, False, None, "demo")
        store.write([LedgerRecord(request_id="req_new", time=2.0, key_id=None, organization_id=None, endpoint="chat",
                                  model="demo", served_model="demo", backend="a", attempts=2, status=200,
                                  error_code=None, route_events='{"events":[]}')])
        assert store.for_request("req_new")[0].route_events == '{"events":[]}'
    finally:
        store.close()
