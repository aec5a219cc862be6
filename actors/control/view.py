"""The database keys as the request path reads them: one immutable value, replaced whole on every change.

A ``KeyView`` maps each accepted digest (a key's current secret, and the one
a rotation replaced while its grace lasts) to its record, and judges a
presented digest at an instant: the key, or the 401 that says why not
(``key_revoked``, ``key_expired``; a rotated-out secret past its grace, a
deleted or an unknown key: ``invalid_api_key``). It holds the
administrators' accounts too, by id and by their token's digest (``admin``).
Plain values and the time as an argument, so the judgement is tested without
a clock or a store.
"""

from __future__ import annotations

from collections import ChainMap
from typing import Iterable, Mapping

import attrs
from attrs import frozen

from switchyard.actors.control.records import AdminRecord, KeyRecord, OrgRecord
from switchyard.actors.errors import AuthenticationError
from switchyard.config.limits import Organization


def revoked() -> AuthenticationError:
    return AuthenticationError("This API key has been revoked", code="key_revoked")


def expired() -> AuthenticationError:
    return AuthenticationError("This API key has expired", code="key_expired")


def invalid() -> AuthenticationError:
    return AuthenticationError("Invalid API key", code="invalid_api_key")


@frozen
class KeyView:
    revision: int = -1                                       # the store's change counter it was read at
    records: Mapping[str, KeyRecord] = attrs.field(factory=dict, repr=False)    # by id
    by_digest: Mapping[bytes, KeyRecord] = attrs.field(factory=dict, repr=False)
    organizations: Mapping[str, OrgRecord] = attrs.field(factory=dict, repr=False)   # by id
    settings: Mapping[str, Organization] = attrs.field(factory=dict, repr=False)   # the organizations' own
    limited: bool = False   # some key or organization has a rate limit or a budget: the limiter has work
    admins: Mapping[str, AdminRecord] = attrs.field(factory=dict, repr=False)         # by id
    admin_digests: Mapping[bytes, AdminRecord] = attrs.field(factory=dict, repr=False)

    @classmethod
    def of(cls, revision: int, records: Iterable[KeyRecord], organizations: Iterable[OrgRecord] = (),
           admins: Iterable[AdminRecord] = ()) -> "KeyView":
        by_id: dict[str, KeyRecord] = {}
        by_digest: dict[bytes, KeyRecord] = {}
        for record in records:
            by_id[record.id] = record
            by_digest[record.digest] = record
            if record.previous is not None:
                by_digest[record.previous.digest] = record
        orgs = {o.id: o for o in organizations}
        limited = any(r.key.rate_limit is not None or r.key.budget is not None for r in by_id.values()) or any(
            o.organization.rate_limit is not None or o.organization.budget is not None for o in orgs.values())
        by_admin = {a.id: a for a in admins}
        return cls(revision, by_id, by_digest, orgs, {o.id: o.organization for o in orgs.values()}, limited,
                   by_admin, {a.digest: a for a in by_admin.values()})

    def admin(self, digest: bytes) -> AdminRecord | None:
        """The account an admin token's digest opens: None when unknown or disabled."""
        record = self.admin_digests.get(digest)
        return record if record is not None and record.disabled_at is None else None

    def organizations_over(self, configured: Mapping[str, Organization]) -> Mapping[str, Organization]:
        """The organizations a call is judged by: the config's, and the database's under other ids."""
        if not self.organizations:
            return configured
        return ChainMap(configured, self.settings)   # type: ignore[arg-type]  # read-only: never written

    def __len__(self) -> int:
        return len(self.records)

    def knows(self, digest: bytes) -> bool:
        return digest in self.by_digest

    def judge(self, digest: bytes, now: float) -> KeyRecord:
        """The record ``digest`` opens at ``now`` (Unix seconds), or the 401 saying why not."""
        record = self.by_digest.get(digest)
        if record is None:
            raise invalid()
        return judged(record, digest, now)


def judged(record: KeyRecord, digest: bytes, now: float) -> KeyRecord:
    """``record`` if the secret with ``digest`` opens it at ``now``, else the 401 saying why not."""
    if record.revoked_at is not None and record.revoked_at <= now:
        raise revoked()
    if record.expires_at is not None and record.expires_at <= now:
        raise expired()
    if digest != record.digest:
        previous = record.previous
        if previous is None or previous.digest != digest or previous.valid_until <= now:
            raise invalid()
    return record
