"""Batches relayed to OpenAI and Azure (``actors/batches/relay.py``), against a fake provider speaking the
documented Files and Batch API on 127.0.0.1 (``tests/batch_fake.py``): which batches are relayed, what the
provider is sent, how its batch is read back into the gateway's row, and the end written once."""

from __future__ import annotations

import json
from typing import Any, AsyncIterator

import pytest
import trio

from switchyard.actors.batches.records import Batch, Line
from switchyard.actors.batches.relay import BatchRelay
from switchyard.actors.batches.relay_poller import RelayPoller
from switchyard.actors.batches.relay_wire import input_file
from switchyard.actors.errors import UpstreamStatusError
from switchyard.actors.ledger.record import LedgerRecord
from switchyard.config.load import load_text
from switchyard.config.schema import Snapshot
from switchyard.protocol.stores.batches_memory import MemoryBatchStore
from switchyard.protocol.wires.upstream import Upstream
from tests.batch_fake import FakeBatches, running

KEY = "provider-key-0123456789"
NOW = 1_700_000_000.0
PRICED = {"id": "gpt-4o-mini", "upstream_id": "gpt-4o-mini-2024-07-18", "metadata": {"pricing": {
    "input_tokens": 0.15, "output_tokens": 0.6, "batch_discount": 0.5}}}


def backend(name: str, kind: str, url: str, models: list[str], **more: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "url": url, "api_key": KEY, "models": models, **more}


def snapshot(*backends: dict[str, Any], relay: bool = True) -> Snapshot:
    return load_text(json.dumps({"backends": list(backends), "batches": {"relay": relay}})).snapshot


def lines(*models: str, batch_id: str = "batch_" + "a" * 24) -> list[Line]:
    return [Line(batch_id, n, f"req-{n}", "/v1/chat/completions",
                 json.dumps({"model": model, "messages": [{"role": "user", "content": f"hello {n}"}]}))
            for n, model in enumerate(models, start=1)]


def new_batch(total: int) -> Batch:
    return Batch(id="batch_" + "a" * 24, owner="key-a", endpoint="/v1/chat/completions", input_file_id="file-in",
                 completion_window="24h", status="validating", created_at=NOW, expires_at=NOW + 86_400, total=total)


OFFLINE = "http://127.0.0.1:9/v1"   # never dialled: choose() does no I/O


def test_a_model_only_openai_serves_is_relayed_to_that_backend():
    snap = snapshot(backend("oai", "openai", OFFLINE, ["gpt-4o-mini"]))
    relay = BatchRelay(MemoryBatchStore(), Upstream(snap), lambda rec: None)
    assert relay.choose(snap, lines("gpt-4o-mini", "gpt-4o-mini")) == "oai"


def test_lines_naming_two_models_are_run_by_the_gateway():
    snap = snapshot(backend("oai", "openai", OFFLINE, ["gpt-4o-mini", "gpt-4o"]))
    relay = BatchRelay(MemoryBatchStore(), Upstream(snap), lambda rec: None)
    assert relay.choose(snap, lines("gpt-4o-mini", "gpt-4o")) is None


def test_a_model_a_vllm_backend_serves_too_is_run_by_the_gateway():
    snap = snapshot(backend("oai", "openai", OFFLINE, ["gpt-4o-mini"]),
                    backend("local", "vllm", "http://127.0.0.1:9", ["gpt-4o-mini"]))
    relay = BatchRelay(MemoryBatchStore(), Upstream(snap), lambda rec: None)
    assert relay.choose(snap, lines("gpt-4o-mini")) is None


def test_with_relay_off_every_batch_is_run_by_the_gateway():
    snap = snapshot(backend("oai", "openai", OFFLINE, ["gpt-4o-mini"]), relay=False)
    relay = BatchRelay(MemoryBatchStore(), Upstream(snap), lambda rec: None)
    assert relay.choose(snap, lines("gpt-4o-mini")) is None


def test_the_first_healthy_backend_in_config_order_takes_the_batch():
    snap = snapshot(backend("oai-1", "openai", OFFLINE, ["gpt-4o-mini"]),
                    backend("oai-2", "openai", OFFLINE, ["gpt-4o-mini"]))
    relay = BatchRelay(MemoryBatchStore(), Upstream(snap), lambda rec: None, routable=lambda name: name != "oai-1")
    assert relay.choose(snap, lines("gpt-4o-mini")) == "oai-2"


def test_a_line_holding_a_lone_surrogate_is_sent_as_its_escape():
    # the upload keeps it (valid JSON); sent unescaped it had no UTF-8, and POST /v1/batches answered 500
    snap = snapshot(backend("oai", "openai", OFFLINE, ["gpt-4o-mini"]))
    line = Line("batch_1", 1, "req-1", "/v1/embeddings", '{"model": "gpt-4o-mini", "input": "\\ud800"}')
    [sent] = input_file([line], "gpt-4o-mini-2024-07-18", snap.backends[0]).splitlines()
    assert json.loads(sent)["body"] == {"model": "gpt-4o-mini-2024-07-18", "input": "\ud800"}


class World:
    """A fake provider, the relay talking to it, the store and the ledger records told."""

    def __init__(self, fake: FakeBatches, snap: Snapshot) -> None:
        self.fake, self.snap = fake, snap
        self.store = MemoryBatchStore()
        self.records: list[LedgerRecord] = []
        self.upstream = Upstream(snap)
        self.relay = BatchRelay(self.store, self.upstream, self.records.append, clock=lambda: NOW + 10)

    async def created(self, count: int = 3) -> Batch:
        """A batch of ``count`` lines created at the provider and kept, as the service does."""
        sent = lines(*["gpt-4o-mini"] * count)
        made = await self.relay.create(self.snap, new_batch(count), sent)
        self.store.add_batch(made, sent)
        return made


@pytest.fixture
async def openai() -> AsyncIterator[World]:
    async with running(FakeBatches(KEY)) as fake:
        world = World(fake, snapshot(backend("oai", "openai", fake.base, ["gpt-4o-mini"], model_configs=[PRICED])))
        yield world
        await world.upstream.aclose()


async def test_create_uploads_the_lines_renamed_and_keeps_the_providers_batch(openai: World):
    made = await openai.created(2)
    upload, create = [s for s in openai.fake.seen if s.method == "POST"]
    assert upload.path == "/v1/files" and upload.headers["authorization"] == f"Bearer {KEY}"
    assert b'name="purpose"\r\n\r\nbatch\r\n' in upload.body
    [sent] = openai.fake.content.values()
    sent_lines = [json.loads(raw) for raw in sent.splitlines()]
    assert [(s["custom_id"], s["url"], s["body"]["model"]) for s in sent_lines] == [
        ("req-1", "/v1/chat/completions", "gpt-4o-mini-2024-07-18"),
        ("req-2", "/v1/chat/completions", "gpt-4o-mini-2024-07-18")]
    assert create.path == "/v1/batches" and json.loads(create.body) == {
        "input_file_id": "file-up0", "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    assert (made.backend, made.upstream_id, made.status, made.total, made.model) == (
        "oai", "batch_up0", "validating", 2, "gpt-4o-mini")
    assert made.id == new_batch(2).id and made.owner == "key-a"


async def test_refresh_copies_the_providers_status_times_and_counts(openai: World):
    made = await openai.created(3)
    openai.fake.batches["batch_up0"].update(status="in_progress", in_progress_at=NOW + 1,
                                            request_counts={"total": 3, "completed": 1, "failed": 1})
    now = await openai.relay.refresh(openai.snap, made)
    stored = openai.store.batch("key-a", made.id)
    assert stored is not None and stored == now
    assert (stored.status, stored.times["in_progress_at"], stored.total, stored.completed, stored.failed) == (
        "in_progress", NOW + 1, 3, 1, 1)
    assert openai.records == []


async def test_a_completed_batch_registers_its_files_and_records_its_lines_once(openai: World):
    made = await openai.created(3)
    openai.fake.complete("batch_up0", failed=("req-2",))
    ended = await openai.relay.refresh(openai.snap, made)
    again = await openai.relay.refresh(openai.snap, made)   # a stale copy, refreshed again
    assert again == ended and ended.status == "completed" and ended.times["completed_at"] == NOW + 3
    output = openai.store.file("key-a", ended.output_file_id or "")
    error = openai.store.file("key-a", ended.error_file_id or "")
    assert output is not None and error is not None
    assert (output.backend, output.upstream_id, output.purpose, output.bytes) == (
        "oai", "file-up1", "batch_output", len(openai.fake.content["file-up1"]))
    assert (error.backend, error.upstream_id) == ("oai", "file-up2")
    assert len(openai.store.files("key-a", None, None, 100)) == 2
    assert [(r.request_id, r.purpose, r.key_id, r.backend, r.model, r.status, r.input_tokens, r.output_tokens)
            for r in openai.records] == [
        ("batch_req_0", "batch", "key-a", "oai", "gpt-4o-mini", 200, 1000, 500),
        ("batch_req_2", "batch", "key-a", "oai", "gpt-4o-mini", 200, 1000, 500)]
    # 1000 input tokens at $0.15/M and 500 output at $0.60/M, half off
    assert [r.cost for r in openai.records] == [pytest.approx(0.000225)] * 2
    assert "file-up0" not in openai.fake.files   # the provider's copy of the input, deleted


async def test_a_batch_the_provider_failed_keeps_its_errors_and_records_nothing(openai: World):
    made = await openai.created(2)
    errors = [{"code": "invalid_request", "message": "Model not supported for batch", "line": 1,
               "param": "body.model"}]
    openai.fake.batches["batch_up0"].update(status="failed", failed_at=NOW + 2,
                                            errors={"object": "list", "data": errors})
    ended = await openai.relay.refresh(openai.snap, made)
    assert openai.store.batch("key-a", made.id) == ended
    assert (ended.status, ended.times["failed_at"], [dict(e) for e in ended.errors]) == ("failed", NOW + 2, errors)
    assert ended.body()["errors"] == {"object": "list", "data": errors}
    assert (ended.output_file_id, ended.error_file_id, openai.records) == (None, None, [])


async def test_two_refreshes_at_once_write_the_end_once(openai: World):
    made = await openai.created(3)
    openai.fake.complete("batch_up0")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(openai.relay.refresh, openai.snap, made)
        nursery.start_soon(openai.relay.refresh, openai.snap, made)
    assert len(openai.records) == 3
    assert len(openai.store.files("key-a", None, None, 100)) == 1


async def test_cancel_is_forwarded_and_the_row_says_cancelling(openai: World):
    made = await openai.created(2)
    now = await openai.relay.cancel(openai.snap, made)
    assert openai.fake.seen[-1].method == "POST" and openai.fake.seen[-1].path == "/v1/batches/batch_up0/cancel"
    stored = openai.store.batch("key-a", made.id)
    assert stored == now and now.status == "cancelling" and now.times["cancelling_at"] == NOW + 5


async def test_a_relayed_files_content_comes_from_its_backend(openai: World):
    made = await openai.created(2)
    openai.fake.complete("batch_up0")
    ended = await openai.relay.refresh(openai.snap, made)
    output = openai.store.file("key-a", ended.output_file_id or "")
    assert output is not None
    assert await openai.relay.content(openai.snap, output) == openai.fake.content["file-up1"]
    assert openai.fake.seen[-1].path == "/v1/files/file-up1/content"


async def test_deleting_a_relayed_file_deletes_it_at_its_backend(openai: World):
    made = await openai.created(2)
    openai.fake.complete("batch_up0")
    ended = await openai.relay.refresh(openai.snap, made)
    output = openai.store.file("key-a", ended.output_file_id or "")
    assert output is not None
    await openai.relay.delete(openai.snap, output)
    assert "file-up1" not in openai.fake.files


async def test_a_providers_refusal_is_passed_through_as_it_came(openai: World):
    refusal = {"error": {"message": "Enqueued token limit reached for gpt-4o-mini", "type": "invalid_request_error",
                         "param": None, "code": "token_limit_exceeded"}}
    openai.fake.refuse(200, {"id": "file-upX"})   # the upload goes through
    openai.fake.refuse(400, refusal)
    with pytest.raises(UpstreamStatusError) as raised:
        await openai.created(2)
    assert (raised.value.status, raised.value.backend) == (400, "oai")
    assert json.loads(raised.value.body()) == refusal


async def test_the_poller_records_an_ended_batch_no_client_asked_for(openai: World):
    await openai.created(2)
    openai.fake.complete("batch_up0")
    poller = RelayPoller(openai.relay, lambda: openai.snap)
    assert await poller.sweep() == 1
    assert len(openai.records) == 2 and openai.store.relayed_open(10) == []
    assert await poller.sweep() == 0


def test_the_poller_asks_every_ten_poll_intervals_and_never_under_thirty_seconds():
    snap = snapshot(backend("oai", "openai", OFFLINE, ["gpt-4o-mini"]))
    slow = load_text(json.dumps({"backends": [backend("oai", "openai", OFFLINE, ["gpt-4o-mini"])],
                                 "batches": {"poll_interval": "6s", "lease": "30s"}})).snapshot
    relay = BatchRelay(MemoryBatchStore(), Upstream(snap), lambda rec: None)
    assert RelayPoller(relay, lambda: snap).interval() == 30.0
    assert RelayPoller(relay, lambda: slow).interval() == 60.0


async def test_azure_is_asked_at_its_v1_root_with_its_api_key_and_the_deployment_as_model():
    async with running(FakeBatches(KEY, azure=True)) as fake:
        deployment = {"id": "gpt-4o-mini", "upstream_id": "my-batch-deployment"}
        world = World(fake, snapshot(backend("az", "azure", fake.base, ["gpt-4o-mini"],
                                             model_configs=[deployment])))
        made = await world.created(2)
        fake.complete("batch_up0")
        await world.relay.refresh(world.snap, made)
        await world.upstream.aclose()
    assert [(s.method, s.path) for s in fake.seen[:4]] == [
        ("POST", "/openai/v1/files"), ("POST", "/openai/v1/batches"), ("GET", "/openai/v1/batches/batch_up0"),
        ("GET", "/openai/v1/files/file-up1")]
    assert all(s.headers["api-key"] == KEY and "authorization" not in s.headers and "api-version" not in s.query
               for s in fake.seen)
    assert {json.loads(raw)["body"]["model"] for raw in fake.content["file-up0"].splitlines()} == {
        "my-batch-deployment"}
    assert len(world.records) == 2
