"""The control plane's store port: what ``ControlPlane`` asks of the records' database.

Implemented below the wire by ``protocol/stores/control.py`` (SQLite or
PostgreSQL, the usage ledger's database); re-exported by ``actors/ports.py``
with the other ports.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

from switchyard.actors.control.records import AdminRecord, AuditEntry, KeyRecord, OrgRecord


class ControlConflict(Exception):
    """A write the control store refused: the id (or the secret's digest) is taken, or the record changed."""


class ControlStore(Protocol):
    """The control plane's records in the usage ledger's database (``protocol/stores/control.py``). Blocking
    methods, run in worker threads; each may raise ``StoreUnavailable``. Every write bumps one change counter
    in the same transaction, so a reader that saw ``revision()`` move reloads and misses nothing; a write given
    an ``audit`` entry writes it in that transaction too."""

    name: str

    def open(self) -> None: ...

    def revision(self) -> int:
        """The change counter: cheap enough to poll every half second from every worker."""
        ...

    def load(self) -> tuple[int, list[KeyRecord]]:
        """Every key record, with the revision they were read at (one transaction)."""
        ...

    def find(self, digest: bytes) -> KeyRecord | None:
        """The record whose current secret, or rotated-out one, has this digest."""
        ...

    def insert(self, record: KeyRecord, audit: AuditEntry | None = None) -> None:
        """A new record; ``ControlConflict`` when its id or digest exists."""
        ...

    def replace(self, record: KeyRecord, updated_at: float, audit: AuditEntry | None = None) -> None:
        """``record`` in place of the stored one with its id, if that one was last updated at ``updated_at``
        (else ``ControlConflict``: another admin changed it first; ``KeyError``: no such id). The stored
        ``last_used_at`` never moves back: a ``touch`` may have come after the caller read the record."""
        ...

    def delete(self, key_id: str, audit: AuditEntry | None = None) -> bool:
        """Forget the record; False when there was none (nothing changed: no revision bumped)."""
        ...

    def touch(self, used: Mapping[str, float]) -> None:
        """Each key id's ``last_used_at``, where later than the stored one; bumps no revision."""
        ...

    def load_organizations(self) -> list[OrgRecord]:
        """Every organization record (read after ``load``: a change between shows as a newer revision)."""
        ...

    def insert_organization(self, record: OrgRecord, audit: AuditEntry | None = None) -> None:
        """``ControlConflict`` when the id exists."""
        ...

    def replace_organization(self, record: OrgRecord, updated_at: float, audit: AuditEntry | None = None
                             ) -> None:
        """As ``replace``, for an organization."""
        ...

    def delete_organization(self, org_id: str, audit: AuditEntry | None = None) -> bool: ...

    def load_admins(self) -> list[AdminRecord]:
        """Every administrator's account (read after ``load``, as the organizations are)."""
        ...

    def insert_admin(self, record: AdminRecord, audit: AuditEntry | None = None) -> None:
        """``ControlConflict`` when the id or the token's digest exists."""
        ...

    def replace_admin(self, record: AdminRecord, updated_at: float, audit: AuditEntry | None = None) -> None:
        """As ``replace``, for an administrator's account."""
        ...

    def delete_admin(self, admin_id: str, audit: AuditEntry | None = None) -> bool: ...

    def audit(self, filters: Mapping[str, Any], limit: int, before_seq: int | None = None) -> list[AuditEntry]:
        """The newest audit entries first (older than ``before_seq``) that match ``filters``."""
        ...

    def prune_audit(self, before: float) -> int:
        """Delete the audit entries older than ``before``; how many."""
        ...

    def close(self) -> None: ...
