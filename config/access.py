"""Client API keys (``api_keys``): who may call the data plane, and what each key may reach.

Keys are looked up by the SHA-256 digest of the presented secret, so a
lookup never compares secrets byte by byte and the secret itself is kept
only inside the frozen ``ApiKey`` (never in a repr, a log line or an error).
"""

from __future__ import annotations

import fnmatch
import hashlib
from typing import Mapping

import attrs
from attrs import frozen


@frozen
class ApiKey:
    id: str
    key: str = attrs.field(repr=False, metadata={"secret": True})
    organization_id: str | None = None
    allowed_models: tuple[str, ...] | None = None     # globs on the requested name; None: every model
    allowed_backends: tuple[str, ...] | None = None   # backend names; None: every public backend
    tier: str | None = None

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

    @classmethod
    def of(cls, keys: tuple[ApiKey, ...]) -> "Access":
        return cls(keys, {key_digest(k.key): k for k in keys})

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def find(self, secret: bytes) -> ApiKey | None:
        return self.by_digest.get(key_digest(secret))
