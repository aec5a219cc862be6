"""A ``KeyRecord`` as a row of ``control_keys`` (migration 5) and back, exactly.

The record's own life (digests, prefixes, instants, its author) has a column
each; the ``ApiKey``'s settings and the record's labels are one JSON text,
``settings``, rebuilt with their constructors (a ``Budget``'s period stored
as its value). A member the code does not know is refused, never skipped:
a row written by a newer Switchyard may carry a restriction this one would
drop. ``tests/unit/test_control_store.py`` checks every ``ApiKey`` field is
in the JSON.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import attrs

from switchyard.actors.control.records import ROLES, AdminRecord, AuditEntry, KeyRecord, OrgRecord, PreviousSecret
from switchyard.config.access import ApiKey
from switchyard.config.limits import Budget, Organization, Period, RateLimit

TABLE = "control_keys"
COLUMNS = ("id", "digest", "prefix", "previous_digest", "previous_prefix", "previous_valid_until", "created_at",
           "updated_at", "expires_at", "revoked_at", "last_used_at", "created_by", "settings")
# the settings JSON's members: every ApiKey field but its id (a column) and its secret (never kept)
SETTINGS = ("organization_id", "tier", "allowed_models", "allowed_backends", "rate_limit", "budget", "metadata",
            "allowed_mcp_servers", "allowed_mcp_tools", "cache")


def row_of(record: KeyRecord) -> tuple[Any, ...]:
    """The column values, in ``COLUMNS`` order."""
    prev = record.previous
    return (record.id, record.digest, record.prefix,
            None if prev is None else prev.digest, None if prev is None else prev.prefix,
            None if prev is None else prev.valid_until,
            record.created_at, record.updated_at, record.expires_at, record.revoked_at, record.last_used_at,
            record.created_by, settings_of(record))


def record_of(row: Sequence[Any]) -> KeyRecord:
    """The record of a row in ``COLUMNS`` order; ``ValueError`` for settings this code cannot rebuild."""
    (key_id, digest, prefix, prev_digest, prev_prefix, prev_until, created_at, updated_at, expires_at, revoked_at,
     last_used_at, created_by, settings) = row
    key, metadata = key_of(key_id, settings)
    previous = None if prev_digest is None else PreviousSecret(bytes(prev_digest), prev_prefix, prev_until)
    return KeyRecord(key=key, prefix=prefix, digest=bytes(digest), created_at=created_at, updated_at=updated_at,
                     created_by=created_by, expires_at=expires_at, metadata=metadata, revoked_at=revoked_at,
                     last_used_at=last_used_at, previous=previous)


def settings_of(record: KeyRecord) -> str:
    key = record.key
    data = {
        "organization_id": key.organization_id,
        "tier": key.tier,
        "allowed_models": None if key.allowed_models is None else list(key.allowed_models),
        "allowed_backends": None if key.allowed_backends is None else list(key.allowed_backends),
        "rate_limit": None if key.rate_limit is None else attrs.asdict(key.rate_limit),
        "budget": _budget_json(key.budget),
        "metadata": dict(record.metadata),
        "allowed_mcp_servers": _listed(key.allowed_mcp_servers),
        "allowed_mcp_tools": _listed(key.allowed_mcp_tools),
        "cache": key.cache,
    }
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def key_of(key_id: str, settings: str) -> tuple[ApiKey, dict[str, str]]:
    """The ``ApiKey`` (its secret "") and the labels of one row's settings."""
    try:
        data = _settings_json(settings, SETTINGS)
        models, backends = data.get("allowed_models"), data.get("allowed_backends")
        rate, budget = data.get("rate_limit"), data.get("budget")
        key = ApiKey(id=key_id, key="", organization_id=data.get("organization_id"), tier=data.get("tier"),
                     allowed_models=None if models is None else tuple(models),
                     allowed_backends=None if backends is None else tuple(backends),
                     rate_limit=None if rate is None else RateLimit(**rate),
                     budget=_budget_of(budget), allowed_mcp_servers=_tuple(data.get("allowed_mcp_servers")),
                     allowed_mcp_tools=_tuple(data.get("allowed_mcp_tools")), cache=data.get("cache"))
        return key, dict(data.get("metadata") or {})
    except (ValueError, TypeError, KeyError) as exc:   # json's errors are ValueErrors
        raise ValueError(f"the settings of key {key_id!r} cannot be read: {exc}") from exc


ORG_TABLE = "control_organizations"
ORG_COLUMNS = ("id", "created_at", "updated_at", "created_by", "settings")
ORG_SETTINGS = ("rate_limit", "budget", "metadata", "allowed_mcp_servers", "allowed_mcp_tools")


def org_row_of(record: OrgRecord) -> tuple[Any, ...]:
    org = record.organization
    data = {"rate_limit": None if org.rate_limit is None else attrs.asdict(org.rate_limit),
            "budget": _budget_json(org.budget), "metadata": dict(record.metadata),
            "allowed_mcp_servers": _listed(org.allowed_mcp_servers),
            "allowed_mcp_tools": _listed(org.allowed_mcp_tools)}
    return (org.id, record.created_at, record.updated_at, record.created_by,
            json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False))


def org_record_of(row: Sequence[Any]) -> OrgRecord:
    """The organization of a row in ``ORG_COLUMNS`` order; ``ValueError`` for settings this code cannot read."""
    org_id, created_at, updated_at, created_by, settings = row
    try:
        data = _settings_json(settings, ORG_SETTINGS)
        rate = data.get("rate_limit")
        org = Organization(id=org_id, budget=_budget_of(data.get("budget")),
                           rate_limit=None if rate is None else RateLimit(**rate),
                           allowed_mcp_servers=_tuple(data.get("allowed_mcp_servers")),
                           allowed_mcp_tools=_tuple(data.get("allowed_mcp_tools")))
        return OrgRecord(org, created_at, updated_at, created_by, dict(data.get("metadata") or {}))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"the settings of organization {org_id!r} cannot be read: {exc}") from exc


def _settings_json(settings: str, known: Sequence[str]) -> dict[str, Any]:
    """A row's settings JSON: an object whose every member this code knows (``ValueError`` otherwise)."""
    data = json.loads(settings)
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object: {settings[:80]!r}")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"members this Switchyard does not know: {', '.join(unknown)}")
    return data


def _listed(names: tuple[str, ...] | None) -> list[str] | None:
    return None if names is None else list(names)


def _tuple(names: Any) -> tuple[str, ...] | None:
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"an allowlist must be a list of strings, got {names!r}")
    return tuple(names)


def _budget_json(budget: Budget | None) -> dict[str, Any] | None:
    if budget is None:
        return None
    return {"limit_usd": budget.limit_usd, "limit_tokens": budget.limit_tokens, "period": budget.period.value}


def _budget_of(data: Any) -> Budget | None:
    return None if data is None else Budget(**{**data, "period": Period(data["period"])})


ADMIN_TABLE = "control_admins"
ADMIN_COLUMNS = ("id", "role", "digest", "prefix", "created_at", "updated_at", "created_by", "disabled_at")


def admin_row_of(record: AdminRecord) -> tuple[Any, ...]:
    return (record.id, record.role, record.digest, record.prefix, record.created_at, record.updated_at,
            record.created_by, record.disabled_at)


def admin_record_of(row: Sequence[Any]) -> AdminRecord:
    """The account of a row in ``ADMIN_COLUMNS`` order; ``ValueError`` for a role this code does not know (a
    newer Switchyard's: read as no role would widen or narrow what it may do)."""
    admin_id, role, digest, prefix, created_at, updated_at, created_by, disabled_at = row
    if role not in ROLES:
        raise ValueError(f"the administrator {admin_id!r} has a role this Switchyard does not know: {role!r}")
    return AdminRecord(admin_id, role, prefix, bytes(digest), created_at, updated_at, created_by, disabled_at)


AUDIT_TABLE = "control_audit"
AUDIT_COLUMNS = ("at", "actor", "address", "action", "target", "target_id", "before", "after")


def audit_row_of(entry: AuditEntry) -> tuple[Any, ...]:
    return (entry.at, entry.actor, entry.address, entry.action, entry.target, entry.target_id,
            _json_or_none(entry.before), _json_or_none(entry.after))


def audit_of(row: Sequence[Any]) -> AuditEntry:
    """An entry of a row: ``seq`` then ``AUDIT_COLUMNS``."""
    seq, at, actor, address, action, target, target_id, before, after = row
    return AuditEntry(at, actor, address, action, target, target_id,
                      None if before is None else json.loads(before), None if after is None else json.loads(after),
                      int(seq))


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
