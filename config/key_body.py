"""Validation of the admin API's JSON bodies for database keys (``/admin/keys``).

A key made through the API is the same ``ApiKey`` as one in ``api_keys``, so
its fields are read with the rules declared on ``ApiKey`` through the same
``Reader``: an API error reads like a config error, rooted at ``body``
(``body.rate_limit.requests_per_minute: must be at least 1, got 0``).
What only a database key has is checked here: its expiry and its labels.
No body carries a secret: the gateway draws it, and shows it once.

Every problem of a body is found in one pass and raised together as one
``KeyBodyError``. Pure: the time is an argument.
"""

from __future__ import annotations

import math
import re
import unicodedata
from datetime import datetime
from typing import Any, Collection, Mapping

import attrs
from attrs import frozen

from switchyard.config import rules
from switchyard.config.access import KEY_ID, ApiKey
from switchyard.config.fields import read
from switchyard.config.limits import Budget, Organization, RateLimit
from switchyard.config.rules import Invalid, Problems, Reader, child

ROOT = "body"
KEY_FIELDS = ("organization_id", "tier", "allowed_models", "allowed_backends", "rate_limit", "budget",
              "allowed_mcp_servers", "allowed_mcp_tools", "cache")
RECORD_FIELDS = ("expires_at", "metadata")   # kept on the record (actors/control/records.py), not on ApiKey
MAX_LABELS = 64
MAX_LABEL_VALUE = 512
MAX_GRACE_SECONDS = 30 * 86400
_LABEL_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")
# RFC 3339 (a space for the T, as its note allows; a lower-case t and z too). [0-9], not \d: no other digits.
_RFC3339 = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]([0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?)"
                      r"([Zz]|[+-][0-9]{2}:[0-9]{2})?")
_YEAR_10000 = 253402300800.0   # datetime cannot show a later time


class KeyBodyError(ValueError):
    """Every problem of a body, each a (path, message) pair."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = tuple(errors)
        super().__init__(f"{len(self.errors)} error(s) in the body:\n  "
                         + "\n  ".join(f"{path}: {message}" for path, message in self.errors))


@attrs.define
class _Problems(Problems):
    """``Problems`` that keep each error's path apart from its message, for the JSON error to list both."""

    pairs: list[tuple[str, str]] = attrs.Factory(list)

    def error(self, path: str, rule: str) -> None:
        if rule == "unknown key":
            rule = "unknown field"   # what JSON calls them
        count = len(self.errors)
        super().error(path, rule)
        if len(self.errors) > count:
            self.pairs.append((path, rule))

    def raise_any(self) -> None:
        if self.pairs:
            raise KeyBodyError(self.pairs)


def _body(data: Any, problems: Problems, *, absent: bool = False) -> Reader:
    """A reader of the body's object; ``absent``: no body at all reads as ``{}``."""
    if data is None and absent:
        data = {}
    if not isinstance(data, Mapping):
        problems.error(ROOT, f"must be a JSON object, got {rules.type_name(data)}")
        data = {}
    return Reader(data, ROOT, problems)


# --- rules ---------------------------------------------------------------------------

def expiry(now: float) -> rules.Rule[float]:
    """Unix seconds from an RFC 3339 time with a timezone, or from Unix seconds; later than ``now``."""
    def rule(value: Any) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and math.isnan(value):
                raise Invalid("must be a number of Unix seconds, got NaN")
            seconds = float(value) if abs(value) < _YEAR_10000 else math.inf if value > 0 else -math.inf
        elif isinstance(value, str):
            seconds = _rfc3339(value)
        else:
            raise Invalid("must be an RFC 3339 time like 2027-01-31T00:00:00Z, or Unix seconds, "
                          f"got {rules.type_name(value)}")
        if seconds >= _YEAR_10000:
            if isinstance(value, str):
                raise Invalid(f"must be before the year 10000, got {value!r}")
            raise Invalid("must be before the year 10000 (in Unix seconds, not milliseconds)")
        if seconds <= now:
            raise Invalid(f"must be in the future, got {value!r}")
        return seconds
    return rule


def instant(text: str) -> float:
    """A time in a query string: RFC 3339 with a timezone, or Unix seconds; ``ValueError`` saying why not."""
    if re.fullmatch(r"[0-9]{1,11}(?:\.[0-9]+)?", text):
        return float(text)
    try:
        return _rfc3339(text)
    except Invalid as exc:
        raise ValueError(str(exc)) from None


def _rfc3339(text: str) -> float:
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise Invalid(f"must be an RFC 3339 time like 2027-01-31T00:00:00Z, or Unix seconds, got {text!r}")
    day, time, zone = m.groups()
    if zone is None:
        raise Invalid(f"has no timezone: end it with Z or an offset like +09:00, got {text!r}")
    try:
        return datetime.fromisoformat(f"{day}T{time}{'+00:00' if zone in 'Zz' else zone}").timestamp()
    except ValueError as exc:
        raise Invalid(f"is not a valid time ({exc}), got {text!r}") from None


def _metadata(r: Reader) -> Mapping[str, str]:
    """Free-form labels: at most 64, named by 1-64 of [A-Za-z0-9._:-], each at most 512 characters of text."""
    path = child(r.path, "metadata")
    value = r.get("metadata", _raw, None)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        r.problems.error(path, f"must be an object of string labels, got {rules.type_name(value)}")
        return {}
    if len(value) > MAX_LABELS:
        r.problems.error(path, f"must have at most {MAX_LABELS} labels, got {len(value)}")
        return {}
    out: dict[str, str] = {}
    for name, text in value.items():
        if not isinstance(name, str) or not _LABEL_NAME.fullmatch(name):
            r.problems.error(path, f"has the label name {name!r}: names must be 1-64 letters, digits, "
                                   "'.', '_', ':' or '-'")
            continue
        try:
            out[name] = _label_value(text)
        except Invalid as exc:
            r.problems.error(child(path, name), str(exc))
    return out


def _label_value(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {rules.type_name(value)}")
    if len(value) > MAX_LABEL_VALUE:
        raise Invalid(f"must be at most {MAX_LABEL_VALUE} characters, got {len(value)}")
    categories = {unicodedata.category(ch) for ch in value}
    if "Cc" in categories:
        raise Invalid("must not contain control characters")
    if "Cs" in categories:
        raise Invalid("must be valid Unicode text (it holds a lone surrogate)")
    return value


def _grace(value: Any) -> int:
    try:
        return rules.integer(0, MAX_GRACE_SECONDS)(value)
    except Invalid as exc:
        raise Invalid(f"{exc} (0 to 30 days, in seconds)") from None


def _raw(value: Any) -> Any:
    return value


# --- bodies --------------------------------------------------------------------------

@frozen
class CreateBody:
    """POST /admin/keys. ``id`` None: the caller makes one."""

    id: str | None = None
    organization_id: str | None = None
    tier: str | None = None
    allowed_models: tuple[str, ...] | None = None
    allowed_backends: tuple[str, ...] | None = None
    rate_limit: RateLimit | None = None
    budget: Budget | None = None
    allowed_mcp_servers: tuple[str, ...] | None = None
    allowed_mcp_tools: tuple[str, ...] | None = None
    cache: bool | None = None
    expires_at: float | None = None             # Unix seconds
    metadata: Mapping[str, str] = attrs.field(factory=dict)

    def api_key(self, generated_id: str) -> ApiKey:
        """The key as the data plane reads it (its secret is never kept: ``key`` is empty)."""
        return ApiKey(id=self.id or generated_id, key="", **{name: getattr(self, name) for name in KEY_FIELDS})

    def values(self) -> dict[str, Any]:
        """Every field but ``id``, by name: what a new key is made of."""
        return {name: getattr(self, name) for name in (*KEY_FIELDS, *RECORD_FIELDS)}


def create_body(data: Any, now: float) -> CreateBody:
    """The body of POST /admin/keys, every field optional; ``now``: Unix seconds, for ``expires_at``."""
    problems = _Problems()
    r = _body(data, problems)
    out = CreateBody(
        id=r.get("id", KEY_ID, None),
        **{name: read(r, ApiKey, name) for name in KEY_FIELDS},
        expires_at=r.get("expires_at", expiry(now), None),
        metadata=_metadata(r),
    )
    r.finish()
    problems.raise_any()
    return out


@frozen
class PatchBody:
    """PATCH /admin/keys/{id}: only the fields in ``given`` change, each to its value here.

    A field given as null is cleared (to None; ``metadata`` to no labels). A
    field given replaces the whole value: ``rate_limit``, ``budget`` and
    ``metadata`` are not merged with the key's.
    """

    given: frozenset[str]
    organization_id: str | None = None
    tier: str | None = None
    allowed_models: tuple[str, ...] | None = None
    allowed_backends: tuple[str, ...] | None = None
    rate_limit: RateLimit | None = None
    budget: Budget | None = None
    allowed_mcp_servers: tuple[str, ...] | None = None
    allowed_mcp_tools: tuple[str, ...] | None = None
    cache: bool | None = None
    expires_at: float | None = None
    metadata: Mapping[str, str] = attrs.field(factory=dict)

    def changes(self) -> dict[str, Any]:
        """Each given field's new value, by name."""
        return {name: getattr(self, name) for name in (*KEY_FIELDS, *RECORD_FIELDS) if name in self.given}

    def applied(self, key: ApiKey) -> ApiKey:
        """``key`` with the given fields of ``ApiKey`` changed."""
        return attrs.evolve(key, **{name: getattr(self, name) for name in KEY_FIELDS if name in self.given})


def patch_body(data: Any, now: float) -> PatchBody:
    """The body of PATCH /admin/keys/{id}: the fields of ``create_body`` but ``id`` (a key keeps its id)."""
    problems = _Problems()
    r = _body(data, problems)
    if "id" in r.raw:
        r.get("id", _raw, None)   # read: refused here, not as an unknown field
        problems.error(child(ROOT, "id"), "cannot change: a key keeps its id (create a new key instead)")
    out = PatchBody(
        given=frozenset(name for name in (*KEY_FIELDS, *RECORD_FIELDS) if name in r.raw),
        **{name: read(r, ApiKey, name) for name in KEY_FIELDS},
        expires_at=r.get("expires_at", expiry(now), None),
        metadata=_metadata(r),
    )
    r.finish()
    problems.raise_any()
    return out


def check_backends(names: tuple[str, ...] | None, known: Collection[str]) -> None:
    """A key may only name backends the config has (a typo would lock it out silently): every name that is
    not one is a ``KeyBodyError`` at ``body.allowed_backends[N]``."""
    unknown = [(f"{ROOT}.allowed_backends[{j}]", f"no backend is named {name!r}")
               for j, name in enumerate(names or ()) if name not in known]
    if unknown:
        raise KeyBodyError(unknown)


@frozen
class RotateBody:
    """POST /admin/keys/{id}/rotate: the new secret works at once; the old one for ``grace_seconds`` more.

    The default, 0, stops the old secret at once: a rotation is often made
    because a secret leaked. A planned one asks for a grace (at most 30
    days) to roll the new secret out first.
    """

    grace_seconds: int = 0


def rotate_body(data: Any) -> RotateBody:
    """The body of a rotation; no body at all is ``{}`` (rotate with no grace)."""
    problems = _Problems()
    r = _body(data, problems, absent=True)
    out = RotateBody(grace_seconds=r.get("grace_seconds", _grace, 0))
    r.finish()
    problems.raise_any()
    return out


# --- organizations (POST /admin/organizations, PATCH /admin/organizations/{id}) ------------------------

ORG_FIELDS = ("budget", "rate_limit", "allowed_mcp_servers", "allowed_mcp_tools")


@frozen
class OrgBody:
    """An organization's body: ``given`` the fields present (a create gives them all, absent ones as None)."""

    given: frozenset[str]
    id: str | None = None
    budget: Budget | None = None
    rate_limit: RateLimit | None = None
    allowed_mcp_servers: tuple[str, ...] | None = None
    allowed_mcp_tools: tuple[str, ...] | None = None
    metadata: Mapping[str, str] = attrs.field(factory=dict)

    def changes(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in (*ORG_FIELDS, "metadata") if name in self.given}


def _record_id(r: Reader, problems: Problems, patch: bool, what: str) -> str | None:
    """A create's ``id`` (required, by the key id's rule); refused in a patch (``what`` keeps its id)."""
    if patch:
        if "id" in r.raw:
            r.get("id", _raw, None)   # read: refused here, not as an unknown field
            problems.error(child(ROOT, "id"), f"cannot change: {what} keeps its id")
        return None
    if not r.has("id"):
        problems.error(child(ROOT, "id"), "is required")
    return r.get("id", KEY_ID, None)


def org_body(data: Any, *, patch: bool) -> OrgBody:
    """POST (``id`` required, as in ``organizations[]``) or PATCH (``id`` refused: an organization keeps it)."""
    problems = _Problems()
    r = _body(data, problems)
    org_id = _record_id(r, problems, patch, "an organization")
    out = OrgBody(given=frozenset(name for name in (*ORG_FIELDS, "metadata") if name in r.raw), id=org_id,
                  **{name: read(r, Organization, name) for name in ORG_FIELDS}, metadata=_metadata(r))
    r.finish()
    problems.raise_any()
    return out


ADMIN_ROLES = ("admin", "operator", "viewer")   # everything; keys, organizations, reloads and reading; reading


@frozen
class AdminBody:
    """An administrator's account's body: ``id`` (a create's) and ``role``."""

    id: str | None
    role: str


def admin_body(data: Any, *, patch: bool) -> AdminBody:
    """POST (``id`` and ``role`` required; ``id`` by the key id's rule) or PATCH (``role`` required; ``id``
    refused: an account keeps it)."""
    problems = _Problems()
    r = _body(data, problems)
    admin_id = _record_id(r, problems, patch, "an administrator")
    if not r.has("role"):
        problems.error(child(ROOT, "role"), f"is required: one of {', '.join(ADMIN_ROLES)}")
    role = r.get("role", rules.one_of({name: name for name in ADMIN_ROLES}), "")
    r.finish()
    problems.raise_any()
    return AdminBody(admin_id, role)
