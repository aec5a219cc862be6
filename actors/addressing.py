"""How each backend is addressed: its routes' URLs and the credentials its own type takes."""

from __future__ import annotations

import functools

import httpx

from switchyard.config import unix_socket
from switchyard.config.kinds import kind_of
from switchyard.config.schema import BackendConfig


@functools.lru_cache(maxsize=1024)
def api_url(base: str, path: str) -> httpx.URL:
    """``join_url`` as a parsed URL, once per backend: parsing it on every call costs more than the lookup."""
    return httpx.URL(join_url(base, path))


def join_url(base: str, path: str) -> str:
    """``base`` + ``path``, where a base ending in ``/v1`` names the API root.

    ``http://h:8000`` and ``http://h:8000/v1`` are the same backend: with
    ``/v1/models`` both give ``http://h:8000/v1/models``, and with a root
    route such as ``/health`` both give ``http://h:8000/health``. A ``unix://``
    socket's routes are ``http+unix://`` URLs our pooled transport dials
    (``config/unix_socket.py``), with its path prefix read the same way.
    """
    if unix_socket.is_unix(base):
        base = unix_socket.request_base(base)
    base = base.rstrip("/")
    if base.endswith("/v1"):
        if path.startswith("/v1/"):
            path = path[3:]
        else:
            base = base[:-3]
    return base + path


def auth_headers(backend: BackendConfig) -> list[tuple[str, str]]:
    """The credentials for a backend's own routes (health, models, engine page), as its kind's ``auth``
    says: the key in its header (``Authorization: Bearer`` unless the kind names another), then the
    headers the kind sends on every route (anthropic: ``anthropic-version``)."""
    auth = kind_of(backend).auth
    key = [(auth.header, auth.prefix + backend.api_key)] if backend.api_key else []
    return [*key, *auth.always(backend)]
