"""The changes made to administrators' accounts: create, change the role, rotate the token, disable, delete.

As for keys (``keys.py``): built from the view's record, written through the
control plane over the version they were made from (409 when someone else
changed it meanwhile), audited in the same transaction (``admin.*``, never
the token), applied here at once and on every worker within the poll. A
token is an admin token (``sya_``, ``secrets.py``), kept as a key's secret
is: its keyed digest and public prefix, shown once at its making.

Two ids are never an account's: ``admin`` (the holder of ``admin.token``,
the bootstrap administrator) and ``cli:...`` (the command line's), so an
audit entry's actor always says which it was. An account is never left the
last way in: while ``admin.token`` is unset, the last enabled account of
role ``admin`` is not demoted, disabled or deleted (409).
"""

from __future__ import annotations

import secrets as random_source
from typing import Callable

import attrs

from switchyard.actors.control import secrets
from switchyard.actors.control.keys import BOOTSTRAP, Actor, replaced
from switchyard.actors.control.plane import ControlPlane
from switchyard.actors.control.records import ROLES, AdminRecord
from switchyard.actors.control.shown import admin_json
from switchyard.actors.control.store import ControlConflict, ControlStore
from switchyard.actors.errors import InvalidRequest, KeyConflict, RouteNotFound

BOOTSTRAP_ID = "admin"   # the holder of admin.token


def admin_not_found(admin_id: str) -> RouteNotFound:
    return RouteNotFound(f"No administrator with id '{admin_id}'", code="admin_not_found")


def check_role(role: object, param: str = "body.role") -> str:
    if role not in ROLES:
        raise InvalidRequest(f"{param}: must be one of {', '.join(ROLES)}, got {role!r}", param=param)
    return str(role)


class AdminChanges:
    """The account changes of the admin API and of ``switchyard admins``; ``bootstrap`` tells whether
    ``admin.token`` is set (then the database's accounts are not the only way in)."""

    def __init__(self, plane: ControlPlane, bootstrap: Callable[[], bool], *, clock: Callable[[], float],
                 random: Callable[[int], bytes] = random_source.token_bytes, actor: Actor = BOOTSTRAP) -> None:
        self.plane = plane
        self.actor = actor
        self._bootstrap = bootstrap
        self._clock = clock
        self._random = random

    def record(self, admin_id: str) -> AdminRecord:
        found = self.plane.view.admins.get(admin_id)
        if found is None:
            raise admin_not_found(admin_id)
        return found

    async def create(self, admin_id: str, role: str) -> tuple[AdminRecord, str]:
        """A new enabled account; its record and its token (shown this once)."""
        store = self.plane.writable()
        if admin_id == BOOTSTRAP_ID or admin_id.startswith("cli:"):
            whose = "the holder of admin.token" if admin_id == BOOTSTRAP_ID else "the command line"
            raise KeyConflict(f"The id '{admin_id}' is kept for {whose}; choose another", param="body.id")
        token, digest = self._new_token()
        now = self._clock()
        record = AdminRecord(admin_id, check_role(role), secrets.public_prefix(token), digest, now, now,
                             self.actor.id)
        try:
            await self.plane.change(store.insert_admin, record, audit=self.actor.entry(
                now, "admin.create", "admin", admin_id, None, admin_json(record)))
        except ControlConflict:
            raise KeyConflict(f"An administrator with the id '{admin_id}' exists", param="body.id") from None
        return record, token

    async def update(self, admin_id: str, role: str) -> AdminRecord:
        store = self.plane.writable()
        old = self.record(admin_id)
        if role != "admin":
            self._keeps_a_way_in(old, "lose the role 'admin'")
        return await self._replace(store, old, attrs.evolve(old, role=check_role(role)), "admin.update")

    async def rotate(self, admin_id: str) -> tuple[AdminRecord, str]:
        """A new token for the account; the old one stops at once (with the console sessions it opened)."""
        store = self.plane.writable()
        old = self.record(admin_id)
        token, digest = self._new_token()
        new = attrs.evolve(old, digest=digest, prefix=secrets.public_prefix(token))
        return await self._replace(store, old, new, "admin.rotate"), token

    async def disable(self, admin_id: str) -> AdminRecord:
        """Its token and its console sessions refused from now on; the account stays listed until deleted."""
        store = self.plane.writable()
        old = self.record(admin_id)
        if old.disabled_at is not None:
            return old
        self._keeps_a_way_in(old, "be disabled")
        return await self._replace(store, old, attrs.evolve(old, disabled_at=self._clock()), "admin.disable")

    async def delete(self, admin_id: str) -> None:
        store = self.plane.writable()
        old = self.record(admin_id)
        self._keeps_a_way_in(old, "be deleted")
        audit = self.actor.entry(self._clock(), "admin.delete", "admin", admin_id, admin_json(old), None)
        if not await self.plane.change(store.delete_admin, admin_id, audit=audit):
            raise admin_not_found(admin_id)

    def _keeps_a_way_in(self, old: AdminRecord, change: str) -> None:
        """Refuse to leave no enabled ``admin`` account while ``admin.token`` is unset (nobody could manage
        administrators any more)."""
        if self._bootstrap() or old.role != "admin" or old.disabled_at is not None:
            return
        others = [a for a in self.plane.view.admins.values()
                  if a.id != old.id and a.role == "admin" and a.disabled_at is None]
        if not others:
            raise KeyConflict(f"The administrator '{old.id}' is the last enabled one of role 'admin' and admin.token "
                              f"is not set: it cannot {change} (make another first)", param="id")

    async def _replace(self, store: ControlStore, old: AdminRecord, new: AdminRecord, action: str) -> AdminRecord:
        return await replaced(self.plane, store.replace_admin, old, new, self._clock(), "administrator",
                              admin_not_found, lambda written: self.actor.entry(
                                  written.updated_at, action, "admin", old.id, admin_json(old), admin_json(written)))

    def _new_token(self) -> tuple[str, bytes]:
        token = secrets.make(self._random(secrets.RANDOM_BYTES), secrets.Kind.ADMIN)
        digest = self.plane.admin_digest(token.encode())
        assert digest is not None   # the plane has a store (writable) and this is an admin token's shape
        return token, digest
