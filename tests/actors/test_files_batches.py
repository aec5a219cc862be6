"""The Files and Batch API doors in process: the switch, the body's fields, the methods, no ledger record, and a
store that is away answering 503 at once instead of hanging."""

from __future__ import annotations

import json

import trio

from switchyard.actors.ledger.record import UsageQuery
from switchyard.protocol.serving.app import App
from tests import postgres
from tests.harness import gateway, request

pg_server, pg_url = postgres.pg_server, postgres.pg_url

CONFIG = """
usage: {ledger: memory}
backends:
  - {name: sim, type: simulated, models: [demo]}
"""
LINE = {"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": {"model": "demo", "input": "hi"}}


def form(content: bytes, purpose: str = "batch") -> tuple[bytes, list[tuple[bytes, bytes]]]:
    body = (b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n' + purpose.encode() +
            b'\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
            b"Content-Type: application/jsonl\r\n\r\n" + content + b"\r\n--b--\r\n")
    return body, [(b"content-type", b"multipart/form-data; boundary=b")]


async def upload(app: App, content: bytes = json.dumps(LINE).encode() + b"\n") -> str:
    body, headers = form(content)
    reply = await request(app, "POST", "/v1/files", body, headers)
    assert reply.status == 200, reply.body
    return str(reply.json()["id"])


async def test_with_batches_off_every_route_answers_as_an_unknown_one():
    async with gateway(CONFIG + "batches: {enabled: false}\n") as app:
        unknown = await request(app, "GET", "/v1/nothing")
        body, headers = form(b"{}\n")
        for method, path, sent, sent_headers in (
                ("POST", "/v1/files", body, headers), ("GET", "/v1/files", None, None),
                ("GET", "/v1/files/file-1", None, None), ("GET", "/v1/files/file-1/content", None, None),
                ("DELETE", "/v1/files/file-1", None, None), ("POST", "/v1/batches", {"input_file_id": "f"}, None),
                ("GET", "/v1/batches", None, None), ("GET", "/v1/batches/batch_1", None, None),
                ("POST", "/v1/batches/batch_1/cancel", None, None)):
            reply = await request(app, method, path, sent, sent_headers)
            assert reply.status == 404, (method, path)
            assert reply.json()["error"] == {**unknown.json()["error"], "message": f"No route for {method} {path}"}


async def test_the_management_calls_leave_no_ledger_record():
    async with gateway(CONFIG) as app:
        file_id = await upload(app)
        made = await request(app, "POST", "/v1/batches", {"input_file_id": file_id, "endpoint": "/v1/embeddings",
                                                          "completion_window": "24h"})
        assert made.status == 200 and made.json()["status"] == "validating"
        for path in ("/v1/files", f"/v1/files/{file_id}", "/v1/batches", f"/v1/batches/{made.json()['id']}"):
            assert (await request(app, "GET", path)).status == 200
        assert (await request(app, "POST", "/v1/batches", {})).status == 400   # a refusal is no call's either
        await app.runtime.ledger.flush()
        assert await app.runtime.ledger.records(UsageQuery(purpose=None), 10) == []


async def test_a_batch_body_is_checked_field_by_field():
    async with gateway(CONFIG) as app:
        file_id = await upload(app)
        good = {"input_file_id": file_id, "endpoint": "/v1/embeddings", "completion_window": "24h"}
        for body, param in (({**good, "priority": "high"}, "priority"),
                            ({**good, "output_expires_after": {"anchor": "created_at", "seconds": 3600}},
                             "output_expires_after"),
                            ({"endpoint": "/v1/embeddings", "completion_window": "24h"}, "input_file_id"),
                            ({**good, "input_file_id": "file-\u0000"}, "input_file_id"),   # a 503 on PostgreSQL
                            ({**good, "endpoint": 3}, "endpoint"),
                            ({**good, "endpoint": "/v1/images/generations"}, "endpoint"),
                            ({**good, "metadata": {"k": 1}}, "metadata.k"),
                            ({**good, "metadata": {f"k{i}": "v" for i in range(17)}}, "metadata")):
            reply = await request(app, "POST", "/v1/batches", body)
            assert (reply.status, reply.json()["error"]["param"]) == (400, param), body
        assert (await request(app, "POST", "/v1/batches", b"[]")).status == 400


async def test_an_upload_form_is_checked_field_by_field():
    async with gateway(CONFIG) as app:
        body, headers = form(b"{}\n")
        no_purpose = body.replace(b'name="purpose"', b'name="expires_after[anchor]"')
        reply = await request(app, "POST", "/v1/files", no_purpose, headers)
        assert (reply.status, reply.json()["error"]["param"]) == (400, "expires_after[anchor]")
        reply = await request(app, "POST", "/v1/files", b"{}", [(b"content-type", b"application/json")])
        assert (reply.status, reply.json()["error"]["param"]) == (400, "content-type")


async def test_a_method_a_file_route_does_not_take_is_a_405():
    async with gateway(CONFIG) as app:
        file_id = await upload(app)
        assert (await request(app, "POST", f"/v1/files/{file_id}")).status == 405
        assert (await request(app, "DELETE", f"/v1/files/{file_id}/content")).status == 405
        assert (await request(app, "POST", "/v1/batches/batch_1")).status == 405
        assert (await request(app, "GET", "/v1/batches/batch_1/cancel")).status == 405
        assert (await request(app, "GET", "/v1/files/a/b")).status == 404


async def test_a_store_that_is_away_is_a_503_within_its_deadlines(pg_server, pg_url):
    async with gateway(f"usage: {{ledger: '{pg_url}'}}\nbackends:\n  - {{name: sim, type: simulated, "
                       f"models: [demo]}}\n") as app:
        file_id = await upload(app)
        await trio.to_thread.run_sync(pg_server.stop)
        with trio.fail_after(15):   # the store's own deadlines answer, never a wait without end
            reply = await request(app, "GET", f"/v1/files/{file_id}")
        assert reply.status == 503
        assert reply.json()["error"]["code"] == "batches_unavailable"
        assert "postgresql store (usage.ledger)" in reply.json()["error"]["message"]
        assert pg_url not in reply.body.decode()
