"""What the control plane keeps of a key (a *database key*), an organization or an administrator's account.

The data plane reads a database key exactly as it reads one from ``api_keys``:
its ``ApiKey`` (``config/access.py``), whose ``key`` is empty here since the
secret itself is never kept, only its keyed digest (``secrets.py``) and a
short public prefix to recognise it by. The rest is the record's own life:
when it was made and by whom, labels, expiry, revocation, last use, and the
secret a rotation replaced, which keeps working until ``valid_until``.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs
from attrs import frozen

from switchyard.config.access import ApiKey
from switchyard.config.key_body import ADMIN_ROLES
from switchyard.config.limits import Organization


@frozen
class PreviousSecret:
    """The secret a rotation replaced: accepted until ``valid_until`` (Unix seconds), then refused."""

    digest: bytes = attrs.field(repr=False)
    prefix: str
    valid_until: float


@frozen
class KeyRecord:
    key: ApiKey                               # what the data plane reads; key.key is "" (never kept)
    prefix: str                               # the secret's public start, e.g. "syk_Ab12Cd34"
    digest: bytes = attrs.field(repr=False)   # secrets.digest(secret): the only form of the secret kept
    created_at: float                         # Unix seconds
    updated_at: float
    created_by: str | None = None             # the admin identity that made it (None: the CLI on the machine)
    expires_at: float | None = None           # refused from then on (key_expired)
    metadata: Mapping[str, str] = attrs.field(factory=dict)   # free-form labels
    revoked_at: float | None = None           # refused from then on (key_revoked)
    last_used_at: float | None = None         # at most a minute behind (written off the request path)
    previous: PreviousSecret | None = None    # a rotation's old secret, still accepted for its grace

    @property
    def id(self) -> str:
        return self.key.id


@frozen
class OrgRecord:
    """An organization made through the admin API: what its keys share (``organizations[]``'s fields)."""

    organization: Organization                # id, budget, rate_limit: what the limiter reads
    created_at: float
    updated_at: float
    created_by: str | None = None
    metadata: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def id(self) -> str:
        return self.organization.id


ROLES = ADMIN_ROLES   # "admin": everything; "operator": keys, organizations, reloads and reading; "viewer": reading


@frozen
class AdminRecord:
    """An administrator's account: its role, and its token kept as keys' secrets are (digest and prefix only).
    A disabled account stays listed, and its token and console sessions stop at once."""

    id: str
    role: str                                 # one of ROLES
    prefix: str                               # the token's public start, e.g. "sya_Ab12Cd34"
    digest: bytes = attrs.field(repr=False)   # secrets.digest(token)
    created_at: float
    updated_at: float
    created_by: str | None = None
    disabled_at: float | None = None


@frozen
class AuditEntry:
    """One change made through the admin API, the CLI or the console: who, when, from where, what, and the
    fields before and after (as the admin API shows them: never a secret). Written in the change's own
    transaction, so no change is without its entry."""

    at: float                                 # Unix seconds
    actor: str                                # an admin's id ("admin": admin.token's holder), "cli:<user>"
    address: str | None                       # the client address it came from (None: the machine itself)
    action: str                               # e.g. "key.create", "key.rotate", "organization.delete"
    target: str                               # "key", "organization", "admin"
    target_id: str
    before: Mapping[str, Any] | None = None
    after: Mapping[str, Any] | None = None
    seq: int | None = None                    # its place in the log, once written
