"""``Batches``: what the Files and Batch API doors ask of the gateway (the Runtime's ``batches``).

Every file and batch is its owner's (``response_owners.owner_of`` of the
key): an id another key made answers exactly as an unknown one. An upload is
checked line by line (``jsonl.py``) before it is kept, so a batch made of it
can only fail line by line. A new batch is relayed to an OpenAI or Azure
backend when the ``Relay`` says so (``relay.py``: the provider runs it), and
otherwise kept with its lines as ``validating`` for the workers' runners.

The store blocks: each call runs in a worker thread behind a
``CapacityLimiter``, and a store that is away (its own deadlines: SQLite's
busy timeout, PostgreSQL's connect and statement timeouts) is a 503 naming
it, never a wait without end. Parsing a large file runs in a thread too.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any, Awaitable, Callable, Generic, Mapping, Protocol, Sequence, TypeVar

import trio
from attrs import frozen

from switchyard.actors.batches import jsonl
from switchyard.actors.batches.calls import store_call
from switchyard.actors.batches.errors import BatchesUnavailable, no_batch, no_file
from switchyard.actors.batches.records import INPUT, TERMINAL, VALIDATING, Batch, Line, StoredFile
from switchyard.actors.batches.store import BatchStore
from switchyard.actors.errors import BodyTooLarge, GatewayError, InvalidRequest
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.config.access import ApiKey
from switchyard.config.schema import Snapshot

log = logging.getLogger("switchyard.batches")

R = TypeVar("R")
T = TypeVar("T")
STORE_CALLS = 4          # store calls of this worker's doors in flight at once (worker threads)
PARSES = 2               # uploads parsed at once (each holds its file's text while it runs)
WINDOW = {"24h": 86_400.0}   # completion_window -> seconds; OpenAI's only value
MAX_FILENAME = 512       # characters of an upload's filename


class Relay(Protocol):
    """The provider side of a batch (``actors/batches/relay.py``): OpenAI and Azure backends run the batches
    whose lines they alone serve; the gateway keeps the ids and the row."""

    def choose(self, snapshot: Snapshot, lines: Sequence[Line]) -> str | None:
        """The OpenAI/Azure backend to relay these lines' batch to; None: the gateway runs it."""
        ...

    async def create(self, snapshot: Snapshot, batch: Batch, lines: Sequence[Line]) -> Batch:
        """Upload the lines and create the provider's batch: ``batch`` with backend, upstream_id, status and
        times from the provider (not yet stored). A provider's error answer is raised as a GatewayError."""
        ...

    async def refresh(self, snapshot: Snapshot, batch: Batch) -> Batch:
        """The provider's view now, stored; a batch that became terminal has its files registered."""
        ...

    async def cancel(self, snapshot: Snapshot, batch: Batch) -> Batch:
        """The provider's batch cancelled; the row as the provider then reports it, stored."""
        ...

    async def content(self, snapshot: Snapshot, file: StoredFile) -> bytes:
        """A relayed file's bytes, from its backend."""
        ...

    async def delete(self, snapshot: Snapshot, file: StoredFile) -> None:
        """Delete a relayed file at its backend too (best effort: a failure is logged)."""
        ...


class ToThread(Protocol):
    """trio.to_thread.run_sync's shape: (fn, *args, limiter=), answering what ``fn`` returns."""

    def __call__(self, fn: Callable[..., R], /, *args: Any, limiter: trio.CapacityLimiter) -> Awaitable[R]: ...


@frozen
class Page(Generic[T]):
    """One page of a list, and whether another follows."""

    rows: list[T]
    has_more: bool


class Batches:
    name = "batches"

    def __init__(self, store: BatchStore | None, current: Callable[[], Snapshot], relay: Relay | None = None, *,
                 clock: Callable[[], float] = time.time, to_thread: ToThread = trio.to_thread.run_sync) -> None:
        """``store`` None: none was given (every call is a 503); ``relay`` None: the gateway runs every batch;
        ``clock``: the wall clock of the rows' instants (shared by a fleet)."""
        self.store = store
        self.relay = relay
        self._current = current
        self._clock = clock
        self._to_thread = to_thread
        self._calls = trio.CapacityLimiter(STORE_CALLS)
        self._parses = trio.CapacityLimiter(PARSES)
        self._opened = False

    async def open(self) -> None:
        """Connect to the store (it raises ``StoreUnavailable`` when it cannot be used): at the Runtime's start."""
        if self.store is not None and not self._opened:
            await store_call(self.store, self.store.open, limiter=self._calls, to_thread=self._to_thread)
            self._opened = True

    async def aclose(self) -> None:
        if self.store is not None and self._opened:
            self._opened = False
            await store_call(self.store, self.store.close, limiter=self._calls, to_thread=self._to_thread)

    async def call(self, fn: Callable[..., R], *args: Any) -> R:
        """One blocking store call in a worker thread (a cancel waits for it: a write is never half-known);
        the store away is ``BatchesUnavailable``."""
        try:
            return await store_call(self._store(), fn, *args, limiter=self._calls, to_thread=self._to_thread)
        except StoreUnavailable as exc:
            raise self._away(exc) from None

    async def _relayed(self, work: Awaitable[Batch]) -> Batch:
        """The relay's answer; the store away as it writes the provider's view is ``BatchesUnavailable`` too."""
        try:
            return await work
        except StoreUnavailable as exc:
            raise self._away(exc) from None

    def _away(self, exc: StoreUnavailable) -> BatchesUnavailable:
        name = self._store().name
        log.warning("batch store (%s) failed: %s", name, exc)
        return BatchesUnavailable(f"Files and batches are kept in the {name} store (usage.ledger), which is not "
                                  f"answering; retry shortly")

    # --- files --------------------------------------------------------------------

    async def upload(self, owner: str, filename: str, purpose: str, content: bytes) -> StoredFile:
        """Check and keep an input file: purpose ``batch``, within ``batches.max_file_bytes``, every line a
        request (``jsonl.py``)."""
        config = self._current().batches
        if purpose != INPUT:
            raise InvalidRequest(f"purpose: must be \"{INPUT}\" (this gateway keeps the Batch API's input files "
                                 f"only), got {jsonl.shown(purpose)}", param="purpose", code="invalid_value")
        if len(content) > config.max_file_bytes:
            raise BodyTooLarge(f"file: {len(content)} bytes; the limit is {config.max_file_bytes} bytes "
                               f"(batches.max_file_bytes)", param="file")
        if len(filename) > MAX_FILENAME:
            raise InvalidRequest(f"file: its filename has {len(filename)} characters; at most {MAX_FILENAME}",
                                 param="file", code="invalid_value")
        parsed = await self._to_thread(jsonl.parse, content, config.max_lines, limiter=self._parses)
        file = StoredFile(f"file-{secrets.token_hex(12)}", owner, INPUT, filename, len(content), self._clock(),
                          lines=len(parsed.requests))
        await self.call(self._store().add_file, file, content)
        return file

    async def file(self, owner: str, file_id: str) -> StoredFile:
        found = await self.call(self._store().file, owner, file_id)
        if found is None:
            raise no_file(file_id)
        return found

    async def files(self, owner: str, purpose: str | None, after: str | None, limit: int,
                    newest_first: bool) -> Page[StoredFile]:
        rows = await self.call(self._store().files, owner, purpose, after, limit + 1, newest_first)
        return Page(rows[:limit], len(rows) > limit)

    async def content(self, owner: str, file_id: str) -> bytes:
        """The file's bytes: kept here, or a relayed file's from its backend."""
        file = await self.file(owner, file_id)
        data = await self.call(self._store().content, file.id)
        if data is not None:
            return data
        if file.backend is None:
            raise no_file(file_id)   # deleted between the two reads
        return await self._relay(file.backend).content(self._current(), file)

    async def delete_file(self, owner: str, file_id: str) -> None:
        """Delete the file (a relayed one at its backend too). A batch made of it keeps its own copy of the
        lines, so deleting an input file never disturbs a batch."""
        file = await self.file(owner, file_id)
        if file.backend is not None and self.relay is not None:
            await self.relay.delete(self._current(), file)
        if not await self.call(self._store().delete_file, owner, file_id):
            raise no_file(file_id)

    # --- batches ------------------------------------------------------------------

    async def create(self, owner: str, input_file_id: str, endpoint: str, completion_window: str,
                     metadata: Mapping[str, str], key: ApiKey | None = None) -> Batch:
        """A batch of the owner's input file, whose lines must all call ``endpoint``: relayed, or kept for the
        runners as ``validating``. Only a batch its ``key`` may send to the chosen backend is relayed (the
        provider checks no allowlist): any other is run here, each line refused as the key's own call is."""
        if endpoint not in jsonl.ENDPOINTS:
            raise InvalidRequest(f"endpoint: must be one of {', '.join(jsonl.ENDPOINTS)}, got "
                                 f"{jsonl.shown(endpoint)}", param="endpoint", code="invalid_value")
        if completion_window not in WINDOW:
            raise InvalidRequest(f"completion_window: must be \"24h\", got {jsonl.shown(completion_window)}",
                                 param="completion_window", code="invalid_value")
        snapshot = self._current()
        file = await self.call(self._store().file, owner, input_file_id)
        if file is None:
            raise no_file(input_file_id, "input_file_id")
        if file.purpose != INPUT:
            raise InvalidRequest(f"input_file_id: {input_file_id} has purpose \"{file.purpose}\"; a batch reads a "
                                 f"file uploaded with purpose \"{INPUT}\"", param="input_file_id",
                                 code="invalid_value")
        content = await self.call(self._store().content, file.id)
        if content is None:
            raise no_file(input_file_id, "input_file_id")
        parsed = await self._to_thread(jsonl.parse, content, snapshot.batches.max_lines, limiter=self._parses)
        if parsed.url != endpoint:
            raise InvalidRequest(f"endpoint: {endpoint} differs from the url of the input file's lines, "
                                 f"{parsed.url}", param="endpoint", code="mismatched_url")
        now = self._clock()
        batch = Batch(f"batch_{secrets.token_hex(12)}", owner, endpoint, file.id, completion_window, VALIDATING,
                      now, now + WINDOW[completion_window], total=len(parsed.requests), metadata=dict(metadata),
                      model=parsed.model)
        lines = [Line(batch.id, r.number, r.custom_id, r.url, r.body) for r in parsed.requests]
        backend = self.relay.choose(snapshot, lines) \
            if self.relay is not None and snapshot.batches.relay else None
        if backend is not None and key is not None and \
                not (parsed.model is not None and key.allows_model(parsed.model) and key.allows_backend(backend)):
            backend = None
        if backend is not None:
            assert self.relay is not None
            batch = await self.relay.create(snapshot, batch, lines)
            lines = []   # the provider runs them
        await self.call(self._store().add_batch, batch, lines)
        return batch

    async def batch(self, owner: str, batch_id: str) -> Batch:
        """The batch as it is now; a relayed one not yet finished is asked of its provider first (when that
        fails, the row as last synced, and the failure logged)."""
        found = await self.call(self._store().batch, owner, batch_id)
        if found is None:
            raise no_batch(batch_id)
        if found.relayed and found.status not in TERMINAL and self.relay is not None:
            try:
                return await self._relayed(self.relay.refresh(self._current(), found))
            except GatewayError as err:
                log.warning("batch %s: its backend %s did not say how it is doing (%s); answering the last known "
                            "state", batch_id, found.backend, err.message)
        return found

    async def batches(self, owner: str, after: str | None, limit: int) -> Page[Batch]:
        rows = await self.call(self._store().batches, owner, after, limit + 1)
        return Page(rows[:limit], len(rows) > limit)

    async def cancel(self, owner: str, batch_id: str) -> Batch:
        """Ask the batch to stop: a relayed one at its provider; a gateway-run one becomes ``cancelling``,
        which its runner sees at its next lease renewal."""
        found = await self.call(self._store().batch, owner, batch_id)
        if found is None:
            raise no_batch(batch_id)
        if found.relayed and found.status not in TERMINAL:
            return await self._relayed(self._relay(found.backend).cancel(self._current(), found))
        cancelled = await self.call(self._store().cancel, owner, batch_id, self._clock())
        if cancelled is None:
            raise no_batch(batch_id)
        return cancelled

    # --- the pieces ---------------------------------------------------------------

    def _store(self) -> BatchStore:
        if self.store is None:
            raise BatchesUnavailable("Files and batches need a store, and this gateway has none; see docs/batches.md")
        return self.store

    def _relay(self, backend: str | None) -> Relay:
        if self.relay is None:
            raise BatchesUnavailable(f"This file or batch is held by the backend {backend}, and relaying batches is "
                                     f"not available on this gateway now")
        return self.relay
