"""The gateway runs batches itself (actors/batches/runner.py): each line through its door, the files at the end.

Batches are put straight into the store (as the doors would store them) and
run on simulated backends under ``autojump_clock``; the runner's wall clock
is virtual time plus ``T0``, so every stored instant is exact. The runner
polls every second: a batch added at 0 is claimed at 1.
"""

from __future__ import annotations

from decimal import Decimal

import attrs
import pytest
import trio

from switchyard.actors.batches.lines import LineAnswer, LineCall
from switchyard.actors.batches.records import CANCELLED, COMPLETED, EXPIRED
from switchyard.actors.ledger.record import UsageQuery
from switchyard.config.access import Access, ApiKey
from tests.actors.batch_support import (
    T0,
    TEAM,
    add_batch,
    chat_line,
    ended,
    file_lines,
    virtual,
    wall,
)
from tests.harness import gateway, request

CONFIG = """
health_checks: {interval: 1h}
usage: {ledger: memory}
batches: {concurrency: 2, poll_interval: 1s, lease: 5s}
api_keys:
  - {id: team, key: sk-team-0123456789abcdef, allowed_models: [demo]}
backends:
  - name: a
    type: simulated
    models: [demo, other]
    simulation: {latency: 100ms, chunks: 2, failure: {status: 400, error_code: too_long, when_body_contains: boom}}
    model_configs: [{id: demo, metadata: {pricing: {input_tokens: 5.0, output_tokens: 30.0, batch_discount: 0.5}}}]
"""

OTHER = ApiKey("other", "sk-other-0123456789abcdef")


def slow(latency: str, concurrency: int = 2) -> str:
    return CONFIG.replace("latency: 100ms", f"latency: {latency}").replace("concurrency: 2",
                                                                           f"concurrency: {concurrency}")


async def test_a_batch_runs_to_completed_with_its_answers_in_line_order(autojump_clock):
    async with gateway(CONFIG) as app:
        virtual(app)
        batch_id = add_batch(app, [chat_line(text=f"line {n}") for n in range(1, 6)])
        batch = await ended(app, batch_id)
        assert batch.status == COMPLETED
        assert (batch.total, batch.completed, batch.failed) == (5, 5, 0)
        assert batch.error_file_id is None
        out = file_lines(app, batch.output_file_id)
        stored = app.runtime.batch_store.file("team", batch.output_file_id)
    assert [line["custom_id"] for line in out] == [f"req-{n}" for n in range(1, 6)]
    for line in out:
        assert line["error"] is None and line["id"].startswith("batch_req_") and len(line["id"]) == 34
        assert line["response"]["status_code"] == 200
        assert line["response"]["request_id"].startswith("req_")
        assert line["response"]["body"]["choices"][0]["message"]["content"].startswith("Hello from a.")
    # claimed at the first poll (1 s), 5 lines two at a time of 100 ms each: 0.3 s
    assert batch.times == {"in_progress_at": T0 + 1, "finalizing_at": T0 + 1.3, "completed_at": T0 + 1.3}
    assert (stored.purpose, stored.filename, stored.created_at) == \
        ("batch_output", f"{batch_id}_output.jsonl", T0 + 1.3)
    assert stored.expires_at == T0 + 1.3 + 30 * 86_400   # batches.file_retention


async def test_a_line_for_a_model_the_key_may_not_use_is_an_error_line_not_a_failed_batch(autojump_clock):
    async with gateway(CONFIG) as app:
        virtual(app)
        batch = await ended(app, add_batch(app, [chat_line(), chat_line("other"), chat_line()]))
        assert (batch.status, batch.completed, batch.failed) == (COMPLETED, 2, 1)
        done, [refused] = file_lines(app, batch.output_file_id), file_lines(app, batch.error_file_id)
    assert [line["custom_id"] for line in done] == ["req-1", "req-3"]
    assert refused["custom_id"] == "req-2" and refused["error"] is None
    assert refused["response"]["status_code"] == 403
    assert refused["response"]["body"]["error"]["message"] == "The API key 'team' may not use the model 'other'"


async def test_a_backend_error_answer_is_an_error_line(autojump_clock):
    async with gateway(CONFIG) as app:
        virtual(app)
        batch = await ended(app, add_batch(app, [chat_line(text="boom"), chat_line()]))
        assert (batch.status, batch.completed, batch.failed) == (COMPLETED, 1, 1)
        [failed] = file_lines(app, batch.error_file_id)
    assert failed["custom_id"] == "req-1"
    assert failed["response"]["status_code"] == 400
    assert failed["response"]["body"]["error"]["code"] == "too_long"


async def test_lines_in_flight_never_exceed_batches_concurrency(autojump_clock):
    async with gateway(slow("1s", concurrency=3)) as app:
        virtual(app)
        sim = app.runtime.upstream.simulated["a.simulated"]
        ids = [add_batch(app, [chat_line() for _ in range(7)]) for _ in range(3)]   # one worker, three batches
        batches = [await ended(app, batch_id) for batch_id in ids]
    assert [(b.status, b.completed) for b in batches] == [(COMPLETED, 7)] * 3
    assert sim.peak_in_flight == 3
    # 21 lines three at a time, one second each: seven rounds from the first poll
    assert max(b.times["completed_at"] for b in batches) == T0 + 1 + 7


@pytest.mark.simulator_history
async def test_a_cancel_is_seen_within_a_poll_and_ends_the_batch_with_what_finished(autojump_clock):
    async with gateway(slow("800ms")) as app:
        virtual(app)
        batch_id = add_batch(app, [chat_line() for _ in range(10)])
        # lines 1-2 run 1.0-1.8, 3-4 1.8-2.6, 5-6 from 2.6; the cancel comes at 2.7, the next renew at 3.0
        await trio.sleep(2.7)
        app.runtime.batch_store.cancel("team", batch_id, wall())
        batch = await ended(app, batch_id)
        sim = app.runtime.upstream.simulated["a.simulated"]
        assert sim.count("cancelled") == 2   # lines 5 and 6, cut in flight
        out = file_lines(app, batch.output_file_id)
    assert batch.status == CANCELLED
    assert batch.times["cancelling_at"] == T0 + 2.7 and batch.times["cancelled_at"] == T0 + 3.0
    assert (batch.completed, batch.failed, batch.error_file_id) == (4, 0, None)
    assert [line["custom_id"] for line in out] == ["req-1", "req-2", "req-3", "req-4"]


async def test_at_expires_at_the_lines_not_run_are_batch_expired_error_lines(autojump_clock):
    async with gateway(slow("800ms")) as app:
        virtual(app)
        # created at 0 with a 2.5 s window: lines 1-2 end at 1.8, 3-4 are cut at 2.5
        batch = await ended(app, add_batch(app, [chat_line() for _ in range(6)], window=2.5))
        out, errors = file_lines(app, batch.output_file_id), file_lines(app, batch.error_file_id)
    assert batch.status == EXPIRED and batch.times["expired_at"] == T0 + 2.5
    assert (batch.completed, batch.failed) == (2, 4)
    assert [line["custom_id"] for line in out] == ["req-1", "req-2"]
    assert [line["custom_id"] for line in errors] == ["req-3", "req-4", "req-5", "req-6"]
    for line in errors:
        assert line["response"] is None
        assert line["error"] == {"code": "batch_expired", "message": "This request could not be executed "
                                                                      "before the completion window expired."}


async def test_an_answer_holding_a_lone_surrogate_is_kept_as_its_escape(autojump_clock):
    # valid JSON no store can write as text: unescaped, the batch crashed at finalizing on every claim, forever
    async def echo(call: LineCall) -> LineAnswer:
        return LineAnswer(200, b'{"text": "\\ud800"}', call.request_id)

    async with gateway(CONFIG) as app:
        virtual(app).runtime.batch_runner.run_line = echo
        batch = await ended(app, add_batch(app, [chat_line()]))
        [line] = file_lines(app, batch.output_file_id)
    assert batch.status == COMPLETED and line["response"]["body"] == {"text": "\ud800"}


async def test_a_line_is_a_batch_record_priced_with_the_batch_discount(autojump_clock):
    async with gateway(CONFIG) as app:
        virtual(app)
        batch = await ended(app, add_batch(app, [chat_line()]))
        [line] = file_lines(app, batch.output_file_id)
        await app.runtime.ledger.flush()
        [rec] = app.runtime.ledger.store.records(UsageQuery(purpose=None), 10)
    usage = line["response"]["body"]["usage"]
    full = (Decimal(usage["prompt_tokens"]) * 5 + Decimal(usage["completion_tokens"]) * 30) / 1_000_000
    assert (rec.purpose, rec.key_id, rec.endpoint, rec.status) == ("batch", "team", "chat", 200)
    assert rec.request_id == line["response"]["request_id"]
    assert Decimal(repr(rec.cost)) == full / 2


async def test_a_line_refused_before_the_pipeline_is_a_batch_record_too(autojump_clock):
    async with gateway(CONFIG) as app:
        virtual(app)
        batch = await ended(app, add_batch(app, [{"model": "demo"}]))   # no messages: the door's 400
        [line] = file_lines(app, batch.error_file_id)
        await app.runtime.ledger.flush()
        [rec] = app.runtime.ledger.store.records(UsageQuery(purpose=None), 10)
    assert line["response"]["status_code"] == 400
    assert (rec.purpose, rec.key_id, rec.status) == ("batch", "team", 400)


async def test_a_line_whose_key_is_gone_is_a_401_error_line(autojump_clock):
    async with gateway(slow("1s", concurrency=1)) as app:
        virtual(app)
        batch_id = add_batch(app, [chat_line(), chat_line()])
        await trio.sleep(1.5)   # line 1 runs from 1.0 to 2.0 under the key
        app.runtime.apply(attrs.evolve(app.runtime.snapshot, api_keys=Access.of((OTHER,))))   # team's is gone
        batch = await ended(app, batch_id)
        [gone] = file_lines(app, batch.error_file_id)
    assert (batch.completed, batch.failed) == (1, 1)
    assert gone["custom_id"] == "req-2" and gone["response"]["status_code"] == 401
    assert gone["response"]["body"]["error"]["code"] == "invalid_api_key"


async def test_lines_after_the_owners_database_key_is_revoked_are_401_error_lines(tmp_path, autojump_clock):
    admin = [(b"authorization", b"Bearer admin-token-0123456789")]
    config = f"""
admin: {{token: admin-token-0123456789}}
server: {{data_dir: "{tmp_path}"}}
health_checks: {{interval: 1h}}
usage: {{ledger: sqlite}}
batches: {{concurrency: 1, poll_interval: 1s, lease: 5s}}
backends:
  - {{name: a, type: simulated, models: [demo], simulation: {{latency: 1s}}}}
"""
    async with gateway(config) as app:
        virtual(app)
        assert (await request(app, "POST", "/admin/keys", {"id": "team-db"}, admin)).status == 201
        batch_id = add_batch(app, [chat_line(), chat_line(), chat_line()], owner="team-db")
        await trio.sleep(1.5)   # line 1 runs from 1.0 to 2.0 under the key
        assert (await request(app, "POST", "/admin/keys/team-db/revoke", None, admin)).status == 200
        batch = await ended(app, batch_id)
        revoked = file_lines(app, batch.error_file_id)
    assert (batch.status, batch.completed, batch.failed) == (COMPLETED, 1, 2)
    assert [line["custom_id"] for line in revoked] == ["req-2", "req-3"]
    for line in revoked:
        assert line["response"]["status_code"] == 401
        assert line["response"]["body"]["error"]["code"] == "key_revoked"


async def test_a_line_the_concurrency_cap_turns_away_is_run_again_not_answered(autojump_clock):
    capped = slow("1s", concurrency=1).replace("health_checks:", "server: {max_concurrent_requests: 1}\nhealth_checks:")
    async with gateway(capped) as app, trio.open_nursery() as nursery:
        virtual(app)
        batch_id = add_batch(app, [chat_line()])
        # a client's call holds the one place from 0.9 to 1.9: the line, tried at 1.0, is tried again a second on
        await trio.sleep(0.9)
        nursery.start_soon(request, app, "POST", "/v1/chat/completions", chat_line(), TEAM)
        batch = await ended(app, batch_id)
        [line] = file_lines(app, batch.output_file_id)
    assert (batch.status, batch.completed, batch.failed) == (COMPLETED, 1, 0)
    assert line["response"]["status_code"] == 200
    assert batch.times["completed_at"] == T0 + 3.0
