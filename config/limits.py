"""Client rate limits and budgets (``rate_limiting``, ``organizations``, ``api_keys[].rate_limit``/
``budget``) and where their counters live (``state``).

A ``RateLimit`` names up to four dimensions; a narrower one *replaces* the
dimensions it names and inherits the rest (``api_keys[].rate_limit`` over
``rate_limiting.per_key``, ``organizations[].rate_limit`` over
``per_organization``), so a key raised to 300 requests a minute keeps the
fleet's token cap. A ``Budget`` caps spend (USD, tokens or both) per UTC
period. The semantics (GCRA, leases, reservations) are the limiter's:
``actors/routing/limits.py``.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, Mapping
from urllib.parse import urlsplit

import attrs
from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field, section
from switchyard.config.mcp_servers import allowlist
from switchyard.config.rules import Invalid, Reader

DIMENSIONS = ("max_concurrent", "requests_per_second", "requests_per_minute", "tokens_per_minute")


def _names_a_limit(_: Any, r: Reader) -> None:
    if not any(r.has(name) for name in DIMENSIONS):
        r.problems.error(r.path or "<top level>", f"names no limit: set {', '.join(DIMENSIONS[1:])} "
                                                  f"or {DIMENSIONS[0]}")


@frozen
class RateLimit:
    """Each dimension None: not limited by this scope."""

    requests_per_second: int | None = field(None, rules.integer(1, 1_000_000))
    requests_per_minute: int | None = field(None, rules.integer(1, 100_000_000))
    tokens_per_minute: int | None = field(None, rules.integer(1, 10**12))
    max_concurrent: int | None = field(None, rules.integer(1, 1_000_000))

    def over(self, base: "RateLimit | None") -> "RateLimit":
        """This limit's dimensions, and ``base``'s where this one names none."""
        if base is None:
            return self
        return RateLimit(*(getattr(self, n) if getattr(self, n) is not None else getattr(base, n)
                           for n in ("requests_per_second", "requests_per_minute", "tokens_per_minute",
                                     "max_concurrent")))

    @property
    def empty(self) -> bool:
        return all(getattr(self, n) is None for n in DIMENSIONS)


def rate_limit_section(*, key: str | None = None) -> Any:
    """An optional ``RateLimit`` mapping: absent is None, an empty one is an error."""
    return section(RateLimit, optional=True, key=key, check=_names_a_limit)


class Period(str, Enum):
    DAY = "day"
    WEEK = "week"          # ISO weeks: from Monday 00:00 UTC
    MONTH = "month"
    TOTAL = "total"        # never resets


def _positive_usd(value: Any) -> float:
    amount = rules.number()(value)
    if not amount > 0 or not math.isfinite(amount):
        raise Invalid(f"must be a positive number of US dollars, got {value!r}")
    return amount


def _one_limit(out: "Budget", r: Reader) -> None:
    if not r.has("limit_usd") and not r.has("limit_tokens"):
        r.problems.error(r.path or "<top level>", "names no limit: set limit_usd, limit_tokens or both")


@frozen
class Budget:
    limit_usd: float | None = field(None, _positive_usd)
    limit_tokens: int | None = field(None, rules.integer(1, 10**15))
    period: Period = field(Period.MONTH, rules.one_of({p.value: p for p in Period}))


def budget_section() -> Any:
    return section(Budget, optional=True, check=_one_limit)


@frozen
class Organization:
    """``organizations[]``: what the keys naming this ``organization_id`` share."""

    id: str                                          # required, unique: read by load_limits
    budget: Budget | None = budget_section()
    rate_limit: RateLimit | None = rate_limit_section()   # over rate_limiting.per_organization
    # what every key of the organization may reach of /mcp, on top of the key's own (docs/mcp.md)
    allowed_mcp_servers: tuple[str, ...] | None = allowlist()
    allowed_mcp_tools: tuple[str, ...] | None = allowlist()


@frozen
class RateLimiting:
    """``rate_limiting``: the scopes every call is judged in (None: that scope sets no limit)."""

    global_: RateLimit | None = rate_limit_section(key="global")
    per_client_ip: RateLimit | None = rate_limit_section()   # after trusted-proxy resolution
    per_key: RateLimit | None = rate_limit_section()         # every key's default
    per_organization: RateLimit | None = rate_limit_section()
    # the model that will run (after presets, aliases and variants) -> its limit; read by load_limits
    per_model: Mapping[str, RateLimit] = attrs.field(factory=dict)

    @property
    def enabled(self) -> bool:
        return any(s is not None for s in (self.global_, self.per_client_ip, self.per_key,
                                           self.per_organization)) or bool(self.per_model)


class OnUnavailable(str, Enum):
    FAIL_OPEN = "fail_open"        # each worker enforces its 1/fleet_workers share locally
    FAIL_CLOSED = "fail_closed"    # every limited call is refused with 503 rate_limiter_unavailable


def redis_url(value: Any) -> str:
    """A ``redis://`` or ``rediss://`` (TLS) URL with a host, and a database number as its path if any.
    No query options: the limiter speaks to Redis itself (protocol/stores/redis_wire.py) and reads
    only these. Split as ``redis_wire.Address`` splits it, so what loads is what it can connect to."""
    if isinstance(value, str):
        text = value.strip()
        parts = urlsplit(text)
        if parts.scheme in ("redis", "rediss") and parts.hostname:
            if parts.query or parts.fragment:
                raise Invalid(f"takes no query options (TLS is rediss://, the database is the path: /0), "
                              f"got {values.quoted_url(value)}")
            try:
                _ = parts.port   # reading it checks it
            except ValueError:
                raise Invalid(f"the port is a number up to 65535, got {values.quoted_url(value)}") from None
            path = parts.path.strip("/")
            if path and not path.isdigit():
                raise Invalid(f"the path is the database number (/0, /1 ...), got {values.quoted_url(value)}")
            return text
    raise Invalid(f"must be a redis:// or rediss:// URL with a host, got {values.quoted_url(value)}")


@frozen
class State:
    """``state``: where the limiters' counters live."""

    # None: in this worker's memory (exact within one worker only)
    redis_url: str | None = field(None, redis_url, repr=False)
    # the bound on one Redis round trip (admission or settle)
    operation_timeout: float = field(0.05, rules.duration(minimum=0.005, maximum=5))
    on_unavailable: OnUnavailable = field(OnUnavailable.FAIL_OPEN,
                                          rules.one_of({o.value: o for o in OnUnavailable}))
    # workers across the fleet sharing redis_url; absent: server.workers (read by load_limits)
    fleet_workers: int = field(1, rules.integer(1, 100_000))
