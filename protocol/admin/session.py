"""The console's login: a signed session cookie that names an administrator, and the CSRF token tied to it.

A session is ``<expiry>.<admin id>.<HMAC-SHA256 of both>``, keyed as
``identity.py`` says (``admin.token`` for its holder, a key derived from the
server secret and the account's token prefix for an account): nothing is
stored, so every worker and every instance behind a load balancer accepts it
with nothing shared but those secrets, and changing the token ends its
sessions at once. The token itself never leaves the login form: not in the
cookie, not in a URL (but for the embedded demo's token of one run, whose
printed link carries it: ``serving/demo_console.py``).

The cookie is HttpOnly (no script reads it), SameSite=Strict (no other site's
page sends it) and Secure when the request came over HTTPS. A call that
changes something (any method but GET and HEAD) made with the cookie also
needs the ``x-csrf-token`` header, an HMAC of the session that only a page
served to that session holds. A bearer token needs neither: a browser never
sends it by itself.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Iterable

COOKIE = "switchyard_console"
LIFETIME = 12 * 3600            # seconds a login lasts
CSRF_HEADER = b"x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD"})


def _mac(key: str | bytes, message: str) -> str:
    return hmac.new(key.encode() if isinstance(key, str) else key, message.encode(), hashlib.sha256).hexdigest()


def new_session(key: str | bytes, now: float, admin_id: str = "admin") -> str:
    """A session of ``admin_id`` that lasts LIFETIME from ``now`` (wall-clock Unix seconds: sessions cross
    instances), signed with ``key`` (``identity.py`` says which)."""
    expires = int(now) + LIFETIME
    return f"{expires}.{admin_id}.{_mac(key, f'session:{expires}:{admin_id}')}"


def session_admin(session: str) -> str | None:
    """The administrator a session names (not checked yet: ``valid_session`` does), None when malformed."""
    expires, dot, rest = session.partition(".")
    admin_id, dot2, _ = rest.rpartition(".")
    if not dot or not dot2 or not admin_id:
        return None
    return admin_id


def valid_session(key: str | bytes, session: str, now: float) -> bool:
    """``session`` was signed with ``key`` and has not expired."""
    expires, dot, rest = session.partition(".")
    admin_id, dot2, mac = rest.rpartition(".")
    if not dot or not dot2 or not expires.isascii() or not expires.isdigit() or len(expires) > 12:   # "²" isdigit
        return False
    if int(expires) <= now:
        return False
    return hmac.compare_digest(mac.encode(), _mac(key, f"session:{expires}:{admin_id}").encode())


def csrf_token(key: str | bytes, session: str) -> str:
    """The CSRF token of ``session``: put in the pages it is served, asked back on every change."""
    return _mac(key, f"csrf:{session}")


def valid_csrf(key: str | bytes, session: str, given: str) -> bool:
    return hmac.compare_digest(given.encode(), csrf_token(key, session).encode())


def session_cookie(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The value of the console's cookie among the request's ``Cookie`` headers; None when absent."""
    for name, value in headers:
        if name != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            key, eq, found = part.strip().partition("=")
            if eq and key == COOKIE:
                return found.strip()
    return None


def header(headers: Iterable[tuple[bytes, bytes]], wanted: bytes) -> str | None:
    for name, value in headers:
        if name == wanted:
            return value.decode("latin-1")
    return None


def set_cookie(session: str, secure: bool) -> bytes:
    """The ``Set-Cookie`` value that logs the browser in. Path=/ so the admin API under any prefix a proxy
    puts in front gets it too (nothing but the admin API reads it)."""
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={session}; Path=/; Max-Age={LIFETIME}; HttpOnly; SameSite=Strict{flags}".encode()


def clear_cookie(secure: bool) -> bytes:
    flags = "; Secure" if secure else ""
    return f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{flags}".encode()


def over_https(scope: dict[str, Any]) -> bool:
    """The browser reached us over HTTPS: directly, or through a proxy that says so (X-Forwarded-Proto)."""
    if scope.get("scheme") == "https":
        return True
    forwarded = header(scope.get("headers", ()), b"x-forwarded-proto")
    return forwarded is not None and forwarded.split(",")[0].strip().lower() == "https"
