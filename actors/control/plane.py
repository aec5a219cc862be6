"""The control plane's actor: the database keys' view kept current, and every change to them made through it.

The request path reads ``view``, an immutable ``KeyView`` replaced whole:
it never waits on the database for a key it knows. Every ``POLL`` seconds
the actor reads the store's change counter (one indexed row) and, when it
moved, reloads the records, so a key created, changed, rotated or revoked
through any worker of any instance sharing the store is seen here within
about ``POLL`` seconds; this worker's own changes replace the view at once.

A secret of the right shape that the view does not know may be a key made
a moment ago elsewhere: ``find`` asks the store for its digest, at most once
per ``MISS_TTL`` per digest (an unknown one is remembered, ``MISS_CACHE``
of them) and at most ``MISS_RATE`` times a second in all, so random
secrets cannot turn into a flood of queries. When the store is away the
view stays as it was (known keys keep working), lookups answer "unknown",
and changes are refused with ``ControlPlaneUnavailable`` naming the store;
the actor keeps trying and recovers by itself.

Last use is noted in memory (``used``) and written at most once a
``TOUCH_EVERY``, off the request path.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import time
from collections import OrderedDict
from typing import Any, Awaitable, Callable, Mapping, Protocol, TypeVar

import trio

from switchyard.actors.control import secrets
from switchyard.actors.control.records import AdminRecord, AuditEntry, KeyRecord
from switchyard.actors.control.store import ControlConflict, ControlStore
from switchyard.actors.control.view import KeyView, judged
from switchyard.actors.errors import ControlPlaneUnavailable

log = logging.getLogger("switchyard.control")

R = TypeVar("R")

POLL = 0.5            # seconds between two reads of the change counter
TOUCH_EVERY = 60.0    # last_used_at is written at most this often
MISS_TTL = 1.0        # seconds a digest the store did not know is not asked again
MISS_CACHE = 10_000   # unknown digests remembered
MISS_RATE = 20        # store lookups of unknown digests per second, at most, per worker
LOOKUP_DEADLINE = 1.0   # seconds a lookup may take before the secret is taken as unknown
PRUNE_EVERY = 3600.0  # seconds between two prunes of the audit log
RETRY_MAX = 5.0       # the longest pause between two tries of a store that is away


class ToThread(Protocol):
    def __call__(self, fn: Callable[..., R], /, *args: Any, limiter: trio.CapacityLimiter) -> Awaitable[R]: ...


class ControlPlane:
    name = "control_plane"

    def __init__(self, store: ControlStore | None, server_secret: bytes | None, *,
                 why_off: str | None = None, retention: Callable[[], float] = lambda: 0.0,
                 clock: Callable[[], float] = time.time,
                 to_thread: ToThread = trio.to_thread.run_sync) -> None:
        """``server_secret`` keys the digests (None: no secret, so no database keys, and ``why_off`` says
        why); ``clock`` is the wall clock expiry and grace are read by (Unix seconds, shared by the fleet)."""
        self.store = store if server_secret is not None else None
        self._secret = server_secret or b""
        self.why_off = why_off if self.store is None else None
        self.clock = clock
        self._retention = retention     # seconds the audit log keeps an entry (the ledger's; 0: forever)
        self._to_thread = to_thread
        self._calls = trio.CapacityLimiter(2)
        self.view = KeyView()
        self.up = False                 # the store answered the last time it was asked
        self.error: str | None = None   # why it did not (never a password)
        self._opened = False
        self._wake = trio.Event()       # a change made here, or a found key: reload now
        self._misses: OrderedDict[bytes, float] = OrderedDict()   # digest -> asked again from (trio time)
        self._lookups: tuple[int, int] = (0, 0)                 # (the second, lookups in it)
        self._used: dict[str, float] = {}                         # key id -> last use, not yet written
        self.lookups = 0        # unknown digests asked of the store, since start
        self.failures = 0       # store calls that failed, since start
        self.reloads = 0        # views read from the store, since start

    # --- the request path ------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """The database holds keys, or may (its store not read yet): the data plane asks for a key even
        when the config has none. A store away at start closes the data plane rather than opening it."""
        return len(self.view) > 0 or (self.store is not None and self.view.revision < 0)

    def digest(self, secret: bytes) -> bytes | None:
        """The keyed digest of a secret of a database key's shape; None for any other secret (no lookup)."""
        if self.store is None or secrets.check(secret) is not secrets.Kind.KEY:
            return None
        return secrets.digest(secret, self._secret)

    def admin_digest(self, token: bytes) -> bytes | None:
        """The keyed digest of a token of an admin token's shape; None for any other value (no lookup)."""
        if self.store is None or secrets.check(token) is not secrets.Kind.ADMIN:
            return None
        return secrets.digest(token, self._secret)

    def admin(self, token: bytes) -> AdminRecord | None:
        """The enabled account ``token`` opens, by the view alone (an account made elsewhere a moment ago is
        known after the next poll); None for any other token."""
        digest = self.admin_digest(token)
        return None if digest is None else self.view.admin(digest)

    def derived_key(self, purpose: str) -> bytes | None:
        """A key for ``purpose`` derived from the server secret (None without one): signs what every instance
        sharing the store must accept, the server secret itself staying here."""
        if self.store is None:
            return None
        return hmac.new(self._secret, f"switchyard:{purpose}".encode(), hashlib.sha256).digest()

    def judge(self, digest: bytes) -> KeyRecord | None:
        """The key ``digest`` opens now, None when the view does not know it; the 401 when it is refused."""
        record = self.view.by_digest.get(digest)
        return None if record is None else judged(record, digest, self.clock())

    async def find(self, digest: bytes) -> KeyRecord | None:
        """A digest the view does not know, asked of the store (bounded, see the module); the record it
        opens, None when unknown; the 401 when it is refused."""
        if self.store is None or not self.up or not self._may_ask(digest):
            return None
        self.lookups += 1
        record = None
        with trio.move_on_after(LOOKUP_DEADLINE):
            try:
                record = await self._call(self.store.find, digest)
            except Exception as exc:
                self._failed(exc, "look up a key")
        if record is None:
            self._misses[digest] = trio.current_time() + MISS_TTL
            self._misses.move_to_end(digest)
            while len(self._misses) > MISS_CACHE:
                self._misses.popitem(last=False)
            return None
        self._wake.set()   # the view catches up with the store now
        return judged(record, digest, self.clock())

    def used(self, key_id: str) -> None:
        """A call came with this key (written with the next batch of last uses)."""
        self._used[key_id] = self.clock()

    def _may_ask(self, digest: bytes) -> bool:
        now = trio.current_time()
        until = self._misses.get(digest)
        if until is not None:
            if until > now:
                return False
            del self._misses[digest]
        second, count = self._lookups
        if int(now) != second:
            second, count = int(now), 0
        if count >= MISS_RATE:
            return False
        self._lookups = (second, count + 1)
        return True

    # --- changes ---------------------------------------------------------------

    def writable(self) -> ControlStore:
        """The store to change, or the 503 that says why there is none now."""
        if self.store is None:
            raise ControlPlaneUnavailable(f"Keys cannot be changed here: {self.why_off or 'no control store'}")
        if not self.up:
            raise ControlPlaneUnavailable(
                f"The control plane's store ({self.store.name}) is not answering: keys in use keep working, "
                f"changes are refused until it is back ({self.error or 'not reached yet'})")
        return self.store

    async def change(self, fn: Callable[..., R], *args: Any, audit: AuditEntry | None = None) -> R:
        """One write to the store (``fn`` one of its methods) with its audit entry, then this worker's view
        reloaded at once."""
        self.writable()
        try:
            out = await self._call(functools.partial(fn, audit=audit), *args)
        except (KeyError, ControlConflict):   # the store's answer about the record, not its failure
            raise
        except Exception as exc:
            self._failed(exc, "change a key")
            raise self._unavailable_now() from None
        await self.reload()
        return out

    def _unavailable_now(self) -> ControlPlaneUnavailable:
        try:
            self.writable()
        except ControlPlaneUnavailable as err:
            return err
        return ControlPlaneUnavailable("The control plane's store failed the change; retry shortly")

    async def audit(self, filters: Mapping[str, Any], limit: int, before_seq: int | None) -> list[AuditEntry]:
        """The audit log's newest entries that match (read from the store: the 503 when it is away)."""
        store = self.writable()
        try:
            return await self._call(store.audit, filters, limit, before_seq)
        except Exception as exc:
            self._failed(exc, "read the audit log")
            raise self._unavailable_now() from None

    # --- the actor -------------------------------------------------------------

    async def open(self) -> None:
        if self.store is not None and not self._opened:
            await self._call(self.store.open)
            self._opened = True
            self.up = True

    async def reload(self) -> None:
        """The view read anew from the store (kept as it was when the store fails)."""
        assert self.store is not None
        try:
            revision, records = await self._call(self.store.load)
            organizations = await self._call(self.store.load_organizations)
            admins = await self._call(self.store.load_admins)
        except Exception as exc:
            self._failed(exc, "read the keys")
            return
        self._recovered()
        self.view = KeyView.of(revision, records, organizations, admins)
        self.reloads += 1

    async def start(self) -> None:
        """Open the store and read the keys, before the Runtime starts anything (so no call is judged
        without them); a store that fails is tried again by ``run``, meanwhile known keys are none."""
        if self.store is None:
            return
        try:
            await self.open()
        except Exception as exc:
            self._failed(exc, "open the control store")
            return
        await self.reload()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(self)
        if self.store is None:
            await trio.sleep_forever()
        pause = POLL
        while not self._opened:   # a store away at start: the gateway serves config keys meanwhile
            await trio.sleep(pause)
            pause = min(RETRY_MAX, pause * 2)
            try:
                await self.open()
            except Exception as exc:
                self._failed(exc, "open the control store")
                continue
            await self.reload()
        next_touch = trio.current_time() + TOUCH_EVERY
        next_prune = trio.current_time()
        while True:
            with trio.move_on_after(POLL if self.up else pause):
                await self._wake.wait()
            self._wake = trio.Event()
            await self._poll()
            pause = POLL if self.up else min(RETRY_MAX, pause * 2)
            if trio.current_time() >= next_touch:
                await self.touch()
                next_touch = trio.current_time() + TOUCH_EVERY
            if trio.current_time() >= next_prune:
                await self.prune_audit()
                next_prune = trio.current_time() + PRUNE_EVERY

    async def _poll(self) -> None:
        assert self.store is not None
        try:
            revision = await self._call(self.store.revision)
        except Exception as exc:
            self._failed(exc, "read the change counter")
            return
        self._recovered()
        if revision != self.view.revision:
            await self.reload()

    async def touch(self) -> None:
        """Write the last uses noted since the last time (kept for the next try when the store fails)."""
        if self.store is None or not self._used:
            return
        used, self._used = self._used, {}
        try:
            await self._call(self.store.touch, used)
        except Exception as exc:
            self._failed(exc, "note when keys were used")
            for key_id, at in used.items():
                self._used[key_id] = max(at, self._used.get(key_id, at))

    async def prune_audit(self) -> None:
        """The audit entries past the ledger's retention deleted (kept as long as the calls they explain)."""
        retention = self._retention()
        if self.store is None or retention <= 0:
            return
        try:
            gone = await self._call(self.store.prune_audit, self.clock() - retention)
        except Exception as exc:
            self._failed(exc, "prune the audit log")
            return
        if gone:
            log.info("control plane: %d audit entr%s older than %d s deleted", gone, "y" if gone == 1 else "ies",
                     retention)

    async def aclose(self) -> None:
        if self.store is not None and self._opened:
            await self.touch()
            self._opened = False
            await self._call(self.store.close)

    # --- helpers ---------------------------------------------------------------

    async def _call(self, fn: Callable[..., R], *args: Any) -> R:
        return await self._to_thread(fn, *args, limiter=self._calls)

    @property
    def store_up(self) -> int:
        return int(self.up)

    @property
    def keys(self) -> int:
        return len(self.view)

    def _failed(self, exc: Exception, what: str) -> None:
        if self.up or self.error is None:
            log.warning("control plane: could not %s in %s: %s", what,
                        self.store.name if self.store is not None else "-", exc)
        self.up = False
        self.failures += 1
        self.error = str(exc) or type(exc).__name__

    def _recovered(self) -> None:
        if not self.up and self._opened:
            log.info("control plane: %s answers again", self.store.name if self.store is not None else "-")
        self.up = self._opened
        self.error = None
