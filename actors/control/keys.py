"""The changes an administrator makes to database keys: create, change, rotate, revoke, delete.

Each builds the new record from the one the view holds and writes it
through the control plane (``ControlPlane.change``), which refuses while
the store is away and reloads this worker's view once the write is in.
A change is written only over the record it was made from (the store
compares ``updated_at``), so two administrators changing one key at once
never lose one change silently: the second gets a 409. A new secret is
returned once, here, and kept nowhere: only its digest and public prefix
are stored.
"""

from __future__ import annotations

import secrets as random_source
from typing import Any, Callable, Mapping, TypeVar

import attrs
from attrs import frozen

from switchyard.actors.control import secrets
from switchyard.actors.control.plane import ControlPlane
from switchyard.actors.control.records import AdminRecord, AuditEntry, KeyRecord, OrgRecord, PreviousSecret
from switchyard.actors.control.shown import key_facts
from switchyard.actors.control.store import ControlConflict
from switchyard.actors.errors import InvalidRequest, KeyConflict, PermissionDenied, RouteNotFound
from switchyard.config.access import ApiKey

# The ApiKey fields an administrator sets (the rest of a record is the record's own life).
KEY_FIELDS = ("organization_id", "tier", "allowed_models", "allowed_backends", "rate_limit", "budget",
              "allowed_mcp_servers", "allowed_mcp_tools", "cache")
RECORD_FIELDS = ("expires_at", "metadata")


R = TypeVar("R", KeyRecord, OrgRecord, AdminRecord)


@frozen
class Actor:
    """Who makes a change, for its audit entry: an admin's id ("admin": the holder of admin.token), or
    ``cli:<user>``; the client address it came from (None: the machine itself)."""

    id: str = "admin"
    address: str | None = None

    def entry(self, at: float, action: str, target: str, target_id: str, before: Mapping[str, Any] | None,
              after: Mapping[str, Any] | None) -> AuditEntry:
        return AuditEntry(at, self.id, self.address, action, target, target_id, before, after)


BOOTSTRAP = Actor()   # the holder of admin.token


async def replaced(plane: ControlPlane, write: Callable[..., None], old: R, new: R, now: float, what: str,
                   missing: Callable[[str], RouteNotFound], audit: Callable[[R], AuditEntry]) -> R:
    """``new`` written over ``old`` only if the store still holds ``old`` (else 409: changed meanwhile), with
    the audit entry ``audit`` makes of the record written."""
    new = attrs.evolve(new, updated_at=max(now, old.updated_at + 1e-6))
    try:
        await plane.change(write, new, old.updated_at, audit=audit(new))
    except KeyError:
        raise missing(old.id) from None
    except ControlConflict:
        raise KeyConflict(f"The {what} '{old.id}' was changed by someone else meanwhile; read it and retry",
                          param="id") from None
    return new


def not_found(key_id: str) -> RouteNotFound:
    return RouteNotFound(f"No API key with id '{key_id}'", code="key_not_found")


class KeyChanges:
    """The key changes of the admin API and of ``switchyard keys`` on one control plane; ``config_ids`` are
    the config's key ids (an id is either the config's or the database's, never both)."""

    def __init__(self, plane: ControlPlane, config_ids: Callable[[], frozenset[str]], *,
                 clock: Callable[[], float], random: Callable[[int], bytes] = random_source.token_bytes,
                 actor: Actor = BOOTSTRAP) -> None:
        self.plane = plane
        self.actor = actor
        self._config_ids = config_ids
        self._clock = clock
        self._random = random

    def record(self, key_id: str) -> KeyRecord:
        """The database key to change: a config key is refused (403: it is changed in the config), no key 404."""
        if key_id in self._config_ids():
            raise PermissionDenied(f"The key '{key_id}' is declared in the config's api_keys: change it there "
                                   f"(only database keys are changed here)", code="key_read_only")
        found = self.plane.view.records.get(key_id)
        if found is None:
            raise not_found(key_id)
        return found

    async def create(self, values: Mapping[str, Any], key_id: str | None, created_by: str | None
                     ) -> tuple[KeyRecord, str]:
        """A new key with ``values`` (``KEY_FIELDS`` and ``RECORD_FIELDS``); its record and its secret."""
        store = self.plane.writable()
        if key_id is None:
            key_id = "key-" + random_source.token_hex(8)
        elif key_id in self._config_ids():
            raise KeyConflict(f"The id '{key_id}' is a key of the config's api_keys; choose another",
                              param="body.id")
        secret, digest = self._new_secret()
        now = self._clock()
        key = ApiKey(id=key_id, key="", **{name: values.get(name) for name in KEY_FIELDS})
        record = KeyRecord(key=key, prefix=secrets.public_prefix(secret), digest=digest, created_at=now,
                           updated_at=now, created_by=created_by, expires_at=values.get("expires_at"),
                           metadata=dict(values.get("metadata") or {}))
        try:
            await self.plane.change(store.insert, record,
                                    audit=self.actor.entry(now, "key.create", "key", key_id, None, key_facts(record)))
        except ControlConflict:
            raise KeyConflict(f"A key with the id '{key_id}' exists", param="body.id") from None
        return record, secret

    async def update(self, key_id: str, changes: Mapping[str, Any]) -> KeyRecord:
        """The key with the given fields set (None clears one); only the fields given change."""
        store = self.plane.writable()
        record = self.record(key_id)
        unknown = set(changes) - set(KEY_FIELDS) - set(RECORD_FIELDS)
        if unknown:
            raise InvalidRequest(f"Unknown field {sorted(unknown)[0]!r}", param=f"body.{sorted(unknown)[0]}")
        key = attrs.evolve(record.key, **{n: v for n, v in changes.items() if n in KEY_FIELDS})
        own = {n: v for n, v in changes.items() if n in RECORD_FIELDS}
        if "metadata" in own:
            own["metadata"] = dict(own["metadata"] or {})
        return await self._replace(store, record, attrs.evolve(record, key=key, **own), "key.update")

    async def rotate(self, key_id: str, grace: float) -> tuple[KeyRecord, str]:
        """A new secret for the key; the current one keeps working for ``grace`` seconds (0: stops now)."""
        store = self.plane.writable()
        record = self.record(key_id)
        if record.revoked_at is not None:
            raise KeyConflict(f"The key '{key_id}' is revoked; a revoked key is not rotated", param="id")
        secret, digest = self._new_secret()
        now = self._clock()
        previous = PreviousSecret(record.digest, record.prefix, now + grace) if grace > 0 else None
        new = attrs.evolve(record, digest=digest, prefix=secrets.public_prefix(secret), previous=previous)
        return await self._replace(store, record, new, "key.rotate"), secret

    async def revoke(self, key_id: str) -> KeyRecord:
        """Refused from now on, every secret of it (a revoked key stays listed until deleted)."""
        store = self.plane.writable()
        record = self.record(key_id)
        if record.revoked_at is not None:
            return record
        return await self._replace(store, record, attrs.evolve(record, revoked_at=self._clock(), previous=None),
                                   "key.revoke")

    async def delete(self, key_id: str) -> None:
        store = self.plane.writable()
        old = self.record(key_id)
        audit = self.actor.entry(self._clock(), "key.delete", "key", key_id, key_facts(old), None)
        if not await self.plane.change(store.delete, key_id, audit=audit):
            raise not_found(key_id)

    async def _replace(self, store: Any, old: KeyRecord, new: KeyRecord, action: str) -> KeyRecord:
        return await replaced(self.plane, store.replace, old, new, self._clock(), "key", not_found,
                              lambda written: self.actor.entry(written.updated_at, action, "key", old.id,
                                                               key_facts(old), key_facts(written)))

    def _new_secret(self) -> tuple[str, bytes]:
        secret = secrets.make(self._random(secrets.RANDOM_BYTES))
        digest = self.plane.digest(secret.encode())
        assert digest is not None   # the plane has a store (writable) and this is a key's shape
        return secret, digest
