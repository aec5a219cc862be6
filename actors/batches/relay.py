"""Batches relayed to OpenAI and Azure: the provider runs them, the gateway keeps the ids, the files and the ledger.

A batch whose lines all name one model that only OpenAI or Azure backends
serve (``choose``) is sent to the first of them that is healthy, in the
config's order (the first one when none is): the provider's own Batch API
runs it at the provider's batch price, which beats running the lines one by
one. ``create`` uploads the lines (each ``model`` renamed to the backend's
upstream id, a deployment name on Azure) and creates the provider's batch;
the gateway's row keeps its backend and the provider's batch id, so a key
only ever reaches its own batches (the service reads rows by owner), all
through the backend's own credentials.

The provider's view is copied into the row by ``refresh`` (a client's read,
and the ``RelayPoller``). Every such write is conditional on the row not
having ended (``BatchStore.update_open``): so of workers that see the batch
end together, exactly one writes the end, and that one alone registers the
provider's output and error files as files of the gateway (new ``file-``
ids, the provider's ids kept beside them) and tells the ledger one record
per output line (``relay_records.py``). The output file is read before that
write, so a read that fails leaves the batch open, to be tried again.

The provider is spoken to through ``provider_api.py``: each request under a
deadline of its own, and an error answer raised as the
``UpstreamStatusError`` any call relays, its status and body as sent.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from typing import Any, Callable, Sequence

import attrs
import trio

from switchyard.actors.batches.calls import store_call
from switchyard.actors.batches.provider_api import FILE_TIMEOUT, ProviderApi
from switchyard.actors.batches.records import FINALIZING, OUTPUT, TERMINAL, Batch, Line, StoredFile
from switchyard.actors.batches.relay_records import OutputRecords
from switchyard.actors.batches.relay_wire import (
    BATCHES,
    FILES,
    RELAYABLE,
    Provided,
    file_facts,
    input_file,
    mapped,
    model_of,
    provided,
)
from switchyard.actors.batches.store import BatchStore
from switchyard.actors.bodies import ResponseTooLarge, body_chunks, whole_body
from switchyard.actors.errors import GatewayError, InternalError, Unavailable, UpstreamProtocolError
from switchyard.actors.ledger.record import LedgerRecord
from switchyard.actors.routing.aliases import dispatch_target
from switchyard.actors.routing.candidates import Discovered, serving
from switchyard.actors.uploads import Upload, Uploads, encode_form
from switchyard.config.schema import BackendConfig, Snapshot

log = logging.getLogger("switchyard.batches")

ENDED_AT = {"completed": "completed_at", "failed": "failed_at", "expired": "expired_at", "cancelled": "cancelled_at"}


def new_file_id() -> str:
    return "file-" + secrets.token_hex(12)


class BatchRelay:
    """The ``Relay`` the batch service is given (``actors/batches/service.py``)."""

    def __init__(self, store: BatchStore, upstream: Any, record: Callable[[LedgerRecord], None], *,
                 discovered: Callable[[], Discovered] = lambda: {}, routable: Callable[[str], bool] = lambda name: True,
                 organization: Callable[[str], str | None] = lambda owner: None,
                 clock: Callable[[], float] = time.time, limiter: trio.CapacityLimiter | None = None) -> None:
        self.store = store
        self.api = ProviderApi(upstream)
        self.record = record                # the ledger's (LedgerActor.record): never waits
        self.discovered = discovered        # the discovery actor's view, read afresh
        self.routable = routable            # the health actor's verdict on a backend, read afresh
        self.organization = organization    # an owner's (a key id's) organization, for its records
        self.clock = clock
        self.limiter = limiter or trio.CapacityLimiter(4)   # the store's blocking calls in worker threads

    # --- the seam ---------------------------------------------------------------------------------------

    def choose(self, snapshot: Snapshot, lines: Sequence[Line]) -> str | None:
        target = self._target(snapshot, lines)
        return None if target is None else target[0].name

    async def create(self, snapshot: Snapshot, batch: Batch, lines: Sequence[Line]) -> Batch:
        target = self._target(snapshot, lines, batch.backend)
        if target is None:
            raise InternalError(f"batch {batch.id} cannot be relayed: its lines' model has no backend to take it")
        backend, public, routed = target
        data = input_file(lines, backend.upstream_ids.get(routed, routed), backend)
        uploads = Uploads.of((Upload("file", f"{batch.id}_input.jsonl", "application/jsonl", data),))
        uploaded = await self.api.json(backend, "POST", FILES, encode_form({"purpose": "batch"}, uploads),
                                       uploads.content_type, FILE_TIMEOUT)
        file_id = uploaded.get("id")
        if not isinstance(file_id, str) or not file_id:
            raise UpstreamProtocolError(f"Backend '{backend.name}' answered a file upload with no file id",
                                        backend=backend.name)
        ask: dict[str, Any] = {"input_file_id": file_id, "endpoint": batch.endpoint,
                               "completion_window": batch.completion_window}
        if batch.metadata:
            ask["metadata"] = dict(batch.metadata)
        try:
            view = provided(await self.api.json(backend, "POST", BATCHES, json.dumps(ask).encode(),
                                                "application/json"), backend.name)
        except GatewayError:
            await self.api.forget(backend, f"{FILES}/{file_id}")
            raise
        made = attrs.evolve(mapped(batch, view), backend=backend.name, model=batch.model or public)
        if view.ended and (view.output_file_id or view.error_file_id):
            made = attrs.evolve(made, status=FINALIZING)   # its files are registered by the first refresh
        return made

    async def refresh(self, snapshot: Snapshot, batch: Batch) -> Batch:
        if batch.status in TERMINAL:
            return batch   # the provider has nothing more to say of it
        backend = self._backend_of(snapshot, batch)
        payload = await self.api.json(backend, "GET", f"{BATCHES}/{batch.upstream_id}")
        return await self._settle(snapshot, backend, batch, provided(payload, backend.name))

    async def cancel(self, snapshot: Snapshot, batch: Batch) -> Batch:
        if batch.status in TERMINAL:
            return batch
        backend = self._backend_of(snapshot, batch)
        payload = await self.api.json(backend, "POST", f"{BATCHES}/{batch.upstream_id}/cancel")
        return await self._settle(snapshot, backend, batch, provided(payload, backend.name))

    async def content(self, snapshot: Snapshot, file: StoredFile) -> bytes:
        backend = self._backend_of(snapshot, file)
        limit = snapshot.server.max_upstream_response_bytes
        async with self.api.exchange(backend, "GET", f"{FILES}/{file.upstream_id}/content",
                                     timeout=FILE_TIMEOUT) as response:
            try:
                return await whole_body(response, limit)
            except ResponseTooLarge:
                raise UpstreamProtocolError(
                    f"Backend '{backend.name}' holds file {file.id} with more than {limit} bytes "
                    f"(server.max_upstream_response_bytes)", code="upstream_response_too_large",
                    backend=backend.name, details={"limit_bytes": limit}) from None

    async def delete(self, snapshot: Snapshot, file: StoredFile) -> None:
        backend = snapshot.backend(file.backend) if file.backend is not None else None
        if backend is None or file.upstream_id is None:
            log.warning("batch file %s: backend %r is not configured; its copy there is left", file.id, file.backend)
            return
        await self.api.forget(backend, f"{FILES}/{file.upstream_id}")

    # --- choosing ---------------------------------------------------------------------------------------

    def _target(self, snapshot: Snapshot, lines: Sequence[Line], named: str | None = None
                ) -> tuple[BackendConfig, str, str] | None:
        """(the backend, the public model the lines name, the model it is routed as), when the batch is to be
        relayed: relaying is on, every line names one model, and every backend serving it is relayable."""
        if not snapshot.batches.relay or not lines:
            return None
        models = {model_of(line) for line in lines}
        public = models.pop() if len(models) == 1 else None
        if public is None:
            return None
        discovered = self.discovered()
        routed = dispatch_target(public, snapshot, discovered) or public
        backends = serving(snapshot.backends, routed, discovered)
        if not backends or any(b.type not in RELAYABLE for b in backends):
            return None
        if named is not None:
            chosen = next((b for b in backends if b.name == named), None)
        else:
            chosen = next((b for b in backends if self.routable(b.name)), backends[0])
        return None if chosen is None else (chosen, public, routed)

    def _backend_of(self, snapshot: Snapshot, held: Batch | StoredFile) -> BackendConfig:
        backend = snapshot.backend(held.backend) if held.backend is not None else None
        if backend is None or held.upstream_id is None:
            raise Unavailable(f"{held.id} is held by backend '{held.backend}', which is no longer configured",
                              code="batch_backend_unavailable")
        return backend

    # --- the end of a batch -----------------------------------------------------------------------------

    async def _settle(self, snapshot: Snapshot, backend: BackendConfig, batch: Batch, view: Provided) -> Batch:
        """The provider's ``view`` written into the row, unless the row has ended; the end written once."""
        now = mapped(batch, view)
        if not view.ended:
            return now if await self._store(self.store.update_open, now) else await self._stored(now)
        stored = await self._stored(now)
        if stored.status in TERMINAL:
            return stored   # ended already: its files and records are another refresh's
        at = self.clock()
        files = {kind: await self._registered(snapshot, backend, batch, upstream_id, kind, at)
                 for kind, upstream_id in (("output", view.output_file_id), ("error", view.error_file_id))
                 if upstream_id is not None}
        records = await self._records(snapshot, backend, now, view) if "output" in files else []
        ended = attrs.evolve(now, output_file_id=files["output"].id if "output" in files else None,
                             error_file_id=files["error"].id if "error" in files else None)
        for file in files.values():
            await self._store(self.store.add_file, file, None)
        if not await self._store(self.store.update_open, ended):   # another worker wrote the end first
            for file in files.values():
                await self._store(self.store.delete_file, file.owner, file.id)
            return await self._stored(ended)
        for rec in records:
            self.record(rec)
        if view.input_file_id is not None:   # the provider's copy of the input, of no more use
            await self.api.forget(backend, f"{FILES}/{view.input_file_id}")
        log.info("relayed batch %s %s on %s: %d ledger record(s)", batch.id, ended.status, backend.name,
                 len(records))
        return ended

    async def _registered(self, snapshot: Snapshot, backend: BackendConfig, batch: Batch, upstream_id: str,
                          kind: str, at: float) -> StoredFile:
        """A provider's output or error file as a file of the batch's owner, its size as the provider says."""
        size, _, expires = file_facts(await self.api.json(backend, "GET", f"{FILES}/{upstream_id}"))
        return StoredFile(id=new_file_id(), owner=batch.owner, purpose=OUTPUT, filename=f"{batch.id}_{kind}.jsonl",
                          bytes=size or 0, created_at=at,
                          expires_at=expires if expires is not None else at + snapshot.batches.file_retention,
                          backend=backend.name, upstream_id=upstream_id)

    async def _records(self, snapshot: Snapshot, backend: BackendConfig, batch: Batch,
                       view: Provided) -> list[LedgerRecord]:
        """One ledger record per line of the provider's output file, read as it arrives."""
        meta = snapshot.metadata_for(batch.model, backend.name) if batch.model is not None else None
        ended_at = view.times.get(ENDED_AT.get(batch.status, ""))
        out = OutputRecords(batch, backend.name, meta.pricing if meta is not None else None,
                            self.organization(batch.owner), ended_at if ended_at is not None else self.clock())
        async with self.api.exchange(backend, "GET", f"{FILES}/{view.output_file_id}/content",
                                     timeout=FILE_TIMEOUT) as response:
            async for chunk in body_chunks(response):
                out.feed(chunk)
        records = out.end()
        if out.skipped:
            log.warning("relayed batch %s: %d line(s) of its output file were not JSON objects", batch.id,
                        out.skipped)
        return records

    async def _store(self, method: Callable[..., Any], *args: Any) -> Any:
        return await store_call(self.store, method, *args, limiter=self.limiter)

    async def _stored(self, batch: Batch) -> Batch:
        """The row as it now is (``batch`` itself if it is gone)."""
        return await self._store(self.store.batch, None, batch.id) or batch
