"""Database and config keys as the admin API, ``GET /v1/key`` and the CLI show them (never a secret).

Times are RFC 3339 UTC strings to the second; ``settings`` is what a key may
reach and spend as written (the limiter's view says what is left of it).
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from switchyard.actors.control.records import AdminRecord, KeyRecord, OrgRecord
from switchyard.config.access import ApiKey
from switchyard.config.limits import Budget, Organization, RateLimit

STATUSES = ("active", "revoked", "expired")


def iso(seconds: float | None) -> str | None:
    """Unix seconds as RFC 3339 UTC, to the second (None stays None)."""
    return None if seconds is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def status_of(record: KeyRecord, now: float) -> str:
    if record.revoked_at is not None and record.revoked_at <= now:
        return "revoked"
    if record.expires_at is not None and record.expires_at <= now:
        return "expired"
    return "active"


def settings(key: ApiKey) -> dict[str, Any]:
    """What the key may reach and spend, as written (the limiter's view says what is left)."""
    return {"tier": key.tier, "allowed_models": _listed(key.allowed_models),
            "allowed_backends": _listed(key.allowed_backends), **limits_json(key.rate_limit, key.budget),
            **mcp_json(key), "cache": key.cache}


def limits_json(rate_limit: RateLimit | None, budget: Budget | None) -> dict[str, Any]:
    """A key's or an organization's ``rate_limit`` and ``budget`` as written."""
    return {"rate_limit": attrs.asdict(rate_limit) if rate_limit is not None else None,
            "budget": None if budget is None else {"limit_usd": budget.limit_usd, "limit_tokens": budget.limit_tokens,
                                                   "period": budget.period.value}}


def mcp_json(owner: ApiKey | Organization) -> dict[str, Any]:
    """A key's or an organization's ``/mcp`` allowlists as written."""
    return {"allowed_mcp_servers": _listed(owner.allowed_mcp_servers),
            "allowed_mcp_tools": _listed(owner.allowed_mcp_tools)}


def _listed(names: tuple[str, ...] | None) -> list[str] | None:
    return list(names) if names is not None else None


def record_fields(record: KeyRecord, now: float) -> dict[str, Any]:
    previous = record.previous
    return {
        "source": "database", "prefix": record.prefix, "status": status_of(record, now),
        "created_at": iso(record.created_at), "updated_at": iso(record.updated_at),
        "created_by": record.created_by, "expires_at": iso(record.expires_at),
        "revoked_at": iso(record.revoked_at), "last_used_at": iso(record.last_used_at),
        "metadata": dict(record.metadata),
        "previous_secret": None if previous is None or previous.valid_until <= now else
        {"prefix": previous.prefix, "valid_until": iso(previous.valid_until)},
    }


def config_fields() -> dict[str, Any]:
    return {"source": "config", "prefix": None, "status": "active", "read_only": True}


def key_facts(record: KeyRecord) -> dict[str, Any]:
    """A database key as its audit entries keep it: what it is and may do, never its secret (its prefix)."""
    previous = record.previous
    return {"id": record.id, "prefix": record.prefix, "organization_id": record.key.organization_id,
            **settings(record.key), "expires_at": iso(record.expires_at), "revoked_at": iso(record.revoked_at),
            "metadata": dict(record.metadata),
            "previous_secret": None if previous is None else {"prefix": previous.prefix,
                                                              "valid_until": iso(previous.valid_until)}}


def org_facts(record: OrgRecord) -> dict[str, Any]:
    org = record.organization
    return {"id": org.id, **limits_json(org.rate_limit, org.budget), **mcp_json(org),
            "metadata": dict(record.metadata)}


def admin_json(record: AdminRecord) -> dict[str, Any]:
    """An administrator's account as the admin API, its audit entries and the CLI show it (the token's prefix,
    never the token)."""
    return {"id": record.id, "role": record.role, "prefix": record.prefix,
            "status": "disabled" if record.disabled_at is not None else "active",
            "created_at": iso(record.created_at), "updated_at": iso(record.updated_at),
            "created_by": record.created_by, "disabled_at": iso(record.disabled_at)}


def page(key: ApiKey, record: KeyRecord | None, now: float) -> dict[str, Any]:
    """A key's page as written (``record`` None: a config key): what ``switchyard keys`` prints, and what the
    admin API adds to the limiter's live view of the key."""
    out: dict[str, Any] = {"id": key.id, "organization_id": key.organization_id}
    out.update(record_fields(record, now) if record is not None else config_fields())
    out["settings"] = settings(key)
    return out
