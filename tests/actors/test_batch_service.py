"""``Batches`` and its seam with the relay: which batches go to the provider, what is kept of them, and how
retrieve and cancel reach it. The relay here records what it is asked (the real one, against a fake OpenAI
upstream, has its own tests)."""

from __future__ import annotations

import json
from typing import Any, Sequence

import attrs
import pytest

from switchyard.actors.batches.errors import BatchesUnavailable, BatchNotFound
from switchyard.actors.batches.records import CANCELLING, IN_PROGRESS, PENDING, VALIDATING, Batch, Line, StoredFile
from switchyard.actors.batches.service import Batches
from switchyard.actors.errors import UpstreamStatusError
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.config.access import ApiKey
from switchyard.config.load import load_text
from switchyard.config.schema import Snapshot
from switchyard.protocol.stores.batches_memory import MemoryBatchStore

T0 = 1_796_000_000.0
LINES = b"".join(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/embeddings",
                             "body": {"model": "text-embedding-3-small", "input": "hi"}}).encode() + b"\n"
                 for i in range(3))


def snapshot(relay: bool = True) -> Snapshot:
    return load_text("backends: [{name: sim, type: simulated, models: [text-embedding-3-small]}]\n"
                     f"batches: {{relay: {str(relay).lower()}}}\n").snapshot


@attrs.define
class Recording:
    """A relay that relays everything to ``oai`` and records each question."""

    backend: str | None = "oai"
    asked: list[tuple[str, Any]] = attrs.Factory(list)
    fail_refresh: bool = False
    store_away: bool = False   # the store fails as the relay writes the provider's view into it

    def choose(self, snapshot: Snapshot, lines: Sequence[Line]) -> str | None:
        self.asked.append(("choose", [line.custom_id for line in lines]))
        return self.backend

    async def create(self, snapshot: Snapshot, batch: Batch, lines: Sequence[Line]) -> Batch:
        self.asked.append(("create", len(lines)))
        return attrs.evolve(batch, backend=self.backend, upstream_id="batch_up1")

    async def refresh(self, snapshot: Snapshot, batch: Batch) -> Batch:
        self.asked.append(("refresh", batch.id))
        if self.store_away:
            raise StoreUnavailable("usage ledger: database is locked")
        if self.fail_refresh:
            raise UpstreamStatusError("oai", 500, b"{}", b"application/json")
        return attrs.evolve(batch, status=IN_PROGRESS)

    async def cancel(self, snapshot: Snapshot, batch: Batch) -> Batch:
        self.asked.append(("cancel", batch.id))
        if self.store_away:
            raise StoreUnavailable("usage ledger: database is locked")
        return attrs.evolve(batch, status=CANCELLING)

    async def content(self, snapshot: Snapshot, file: StoredFile) -> bytes:
        self.asked.append(("content", file.id))
        return b"from the provider"

    async def delete(self, snapshot: Snapshot, file: StoredFile) -> None:
        self.asked.append(("delete", file.id))


def service(relay: Recording | None, relay_on: bool = True) -> tuple[Batches, MemoryBatchStore]:
    store = MemoryBatchStore()
    current = snapshot(relay_on)
    return Batches(store, lambda: current, relay, clock=lambda: T0), store


async def test_a_batch_the_relay_chooses_is_created_at_the_provider_and_kept_without_lines():
    relay = Recording()
    batches, store = service(relay)
    file = await batches.upload("key-a", "in.jsonl", "batch", LINES)
    made = await batches.create("key-a", file.id, "/v1/embeddings", "24h", {})
    assert relay.asked == [("choose", ["r0", "r1", "r2"]), ("create", 3)]
    assert (made.backend, made.upstream_id, made.total, made.model) == ("oai", "batch_up1", 3, "text-embedding-3-small")
    assert store.batch("key-a", made.id) == made and store.lines(made.id, PENDING, 0, 10) == []
    assert store.claim("w1", T0, T0 + 30) is None   # the provider's to run


async def test_without_a_relay_choice_the_batch_is_kept_for_the_runners():
    for relay, relay_on in ((Recording(backend=None), True), (Recording(), False), (None, True)):
        batches, store = service(relay, relay_on)
        file = await batches.upload("key-a", "in.jsonl", "batch", LINES)
        made = await batches.create("key-a", file.id, "/v1/embeddings", "24h", {"k": "v"})
        assert (made.status, made.backend, made.created_at, made.expires_at) == (VALIDATING, None, T0, T0 + 86_400)
        assert [line.custom_id for line in store.lines(made.id, PENDING, 0, 10)] == ["r0", "r1", "r2"]
        if relay is not None:
            assert ("create", 3) not in relay.asked and (relay_on or relay.asked == [])


async def test_a_batch_the_key_may_not_send_to_the_provider_is_run_by_the_gateway_not_relayed():
    # the provider checks no allowlist: relayed, the batch would run a model or reach a backend the key may not
    for key in (ApiKey("key-a", "sk-a-0123456789abcdef", allowed_models=("gpt-*",)),
                ApiKey("key-a", "sk-a-0123456789abcdef", allowed_backends=("sim",))):
        relay = Recording()
        batches, store = service(relay)
        file = await batches.upload("key-a", "in.jsonl", "batch", LINES)
        made = await batches.create("key-a", file.id, "/v1/embeddings", "24h", {}, key)
        assert (made.status, made.backend) == (VALIDATING, None) and ("create", 3) not in relay.asked
        assert len(store.lines(made.id, PENDING, 0, 10)) == 3   # each line refused by the door, as the key's call


async def test_a_relayed_batch_is_refreshed_on_retrieve_and_cancelled_at_its_provider():
    relay = Recording()
    batches, store = service(relay)
    file = await batches.upload("key-a", "in.jsonl", "batch", LINES)
    made = await batches.create("key-a", file.id, "/v1/embeddings", "24h", {})
    assert (await batches.batch("key-a", made.id)).status == IN_PROGRESS
    assert (await batches.cancel("key-a", made.id)).status == CANCELLING
    assert relay.asked[-2:] == [("refresh", made.id), ("cancel", made.id)]
    relay.fail_refresh = True   # the provider away: the row as last synced
    assert (await batches.batch("key-a", made.id)) == store.batch("key-a", made.id)
    with pytest.raises(BatchNotFound):
        await batches.cancel("key-b", made.id)


async def test_the_store_away_under_a_relayed_batch_is_a_503_never_a_500():
    relay = Recording()
    batches, store = service(relay)
    file = await batches.upload("key-a", "in.jsonl", "batch", LINES)
    made = await batches.create("key-a", file.id, "/v1/embeddings", "24h", {})
    relay.store_away = True
    assert (await batches.batch("key-a", made.id)) == store.batch("key-a", made.id)   # the row as last synced
    with pytest.raises(BatchesUnavailable):
        await batches.cancel("key-a", made.id)


async def test_a_relayed_file_is_read_and_deleted_at_its_backend():
    relay = Recording()
    batches, store = service(relay)
    store.add_file(StoredFile("file-r", "key-a", "batch_output", "out.jsonl", 17, T0, backend="oai",
                              upstream_id="file-up"), None)
    assert await batches.content("key-a", "file-r") == b"from the provider"
    await batches.delete_file("key-a", "file-r")
    assert relay.asked == [("content", "file-r"), ("delete", "file-r")] and store.file(None, "file-r") is None
