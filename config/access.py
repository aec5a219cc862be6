"""Client API keys (``api_keys``): who may call the data plane, and what each key may reach.

Keys are looked up by the SHA-256 digest of the presented secret, so a
lookup never compares secrets byte by byte and the secret itself is kept
only inside the frozen ``ApiKey`` (never in a repr, a log line or an error).
"""

from __future__ import annotations

import fnmatch
import hashlib
from typing import Any, Mapping

import attrs
from attrs import frozen

from switchyard.config import rules
from switchyard.config.fields import field
from switchyard.config.limits import Budget, RateLimit, budget_section, rate_limit_section
from switchyard.config.mcp_servers import allowlist
from switchyard.config.rules import Invalid

# A key's id: in ``api_keys`` and in the admin API's bodies alike.
KEY_ID = rules.string(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}", "1-128 letters, digits, '.', '_', ':', '@' or '-'")


def _label(value: Any) -> str:
    text = rules.string()(value)
    if len(text) > 256 or text != text.strip() or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise Invalid("must be 1-256 characters without control characters or outer spaces")
    return text


def _names(item: rules.Rule[str], what: str) -> rules.Rule[tuple[str, ...]]:
    listed = rules.list_of(item, what)

    def rule(value: Any) -> tuple[str, ...]:
        out = listed(value)
        if not out:
            raise Invalid("must not be empty; leave the key out to allow every one")
        return tuple(dict.fromkeys(out))
    return rule


@frozen
class ApiKey:
    id: str                                           # id and key: required, read by load_access
    key: str = attrs.field(repr=False, metadata={"secret": True})
    organization_id: str | None = field(None, _label)
    # globs on the requested name; None: every model
    allowed_models: tuple[str, ...] | None = field(None, _names(rules.string(), "model names or globs"))
    # backend names; None: every public backend
    allowed_backends: tuple[str, ...] | None = field(None, _names(rules.string(), "backend names"))
    tier: str | None = field(None, _label)
    rate_limit: RateLimit | None = rate_limit_section()   # replaces the dimensions it names of rate_limiting.per_key
    budget: Budget | None = budget_section()
    # globs on MCP server names, and on public tool names (<server>__<tool>); None: every one (docs/mcp.md)
    allowed_mcp_servers: tuple[str, ...] | None = allowlist()
    allowed_mcp_tools: tuple[str, ...] | None = allowlist()
    # false: this key's calls never read nor write the response cache (exact or semantic); None: as configured
    cache: bool | None = field(None, rules.boolean)

    def allows_model(self, model: str) -> bool:
        if self.allowed_models is None:
            return True
        return any(fnmatch.fnmatchcase(model, pattern) for pattern in self.allowed_models)

    def allows_backend(self, backend: str) -> bool:
        return self.allowed_backends is None or backend in self.allowed_backends


def key_digest(secret: str | bytes) -> bytes:
    raw = secret.encode() if isinstance(secret, str) else secret
    return hashlib.sha256(raw).digest()


@frozen
class Access:
    """Every configured key, by digest. No keys: the data plane is open."""

    keys: tuple[ApiKey, ...] = ()
    by_digest: Mapping[bytes, ApiKey] = attrs.field(factory=dict, repr=False, metadata={"internal": True})
    # some key has a rate limit or a budget: found once here, not per call over every key
    limited: bool = attrs.field(default=False, repr=False, metadata={"internal": True})

    @classmethod
    def of(cls, keys: tuple[ApiKey, ...]) -> "Access":
        return cls(keys, {key_digest(k.key): k for k in keys},
                   any(k.rate_limit is not None or k.budget is not None for k in keys))

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def find(self, secret: bytes) -> ApiKey | None:
        return self.by_digest.get(key_digest(secret))
