"""Who calls the admin API: the holder of ``admin.token`` (the bootstrap administrator, ``admin``, role
``admin``) or an administrator's account of the database, by a bearer token or the console's session.

A bearer token is compared with ``admin.token`` in constant time, then, when
it has an admin token's shape (``sya_``, checked offline first), judged by
the control plane's view: no store is asked on the request path, and a
disabled or deleted account's token stops at the next view (at once on this
worker, within the poll on the others).

The console's session names its administrator and is signed with
``admin.token`` for its holder, and for an account with a key derived from
the server secret and the account's token prefix: every instance sharing the
store accepts it, nothing is stored, and rotating the token, disabling or
deleting the account (its record looked up at each request) ends its
sessions at the next request. The role is read at each request too, so a
changed role applies at once.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import TYPE_CHECKING, Any, Mapping

from attrs import frozen

from switchyard.actors.control.admins import BOOTSTRAP_ID
from switchyard.actors.control.records import AdminRecord
from switchyard.actors.errors import AuthenticationError, PermissionDenied
from switchyard.protocol.admin import session

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

SCOPE_KEY = "switchyard.admin"   # the authenticated Admin, in the request's scope


@frozen
class Admin:
    id: str
    role: str


BOOTSTRAP = Admin(BOOTSTRAP_ID, "admin")


def served(runtime: "Runtime") -> bool:
    """The admin API is on: ``admin.token`` is set, or the database holds administrators' accounts."""
    return runtime.snapshot.admin.token is not None or bool(runtime.control.view.admins)


def of_token(runtime: "Runtime", given: str) -> Admin | None:
    """The administrator ``given`` is the token of; None for any other value."""
    token = runtime.snapshot.admin.token
    if token is not None and hmac.compare_digest(given.encode(), token.encode()):
        return BOOTSTRAP
    if not given.isascii():
        return None
    record = runtime.control.admin(given.encode())
    return None if record is None else Admin(record.id, record.role)


def of_session(runtime: "Runtime", cookie: str, now: float) -> tuple[Admin, bytes] | None:
    """The administrator a valid session names, with the key it is signed with; None for an invalid or
    expired session, or one of an account since disabled, deleted or given a new token."""
    admin_id = session.session_admin(cookie)
    if admin_id is None:
        return None
    if admin_id == BOOTSTRAP_ID:
        token = runtime.snapshot.admin.token
        if token is None:
            return None
        who, key = BOOTSTRAP, token.encode()
    else:
        record = runtime.control.view.admins.get(admin_id)
        if record is None or record.disabled_at is not None:
            return None
        account = account_key(runtime, record)
        if account is None:
            return None
        who, key = Admin(admin_id, record.role), account
    return (who, key) if session.valid_session(key, cookie, now) else None


def session_key(runtime: "Runtime", admin: Admin) -> bytes:
    """The key ``admin``'s sessions are signed with."""
    if admin.id == BOOTSTRAP_ID:
        token = runtime.snapshot.admin.token
        assert token is not None   # the bootstrap administrator exists only with admin.token
        return token.encode()
    key = account_key(runtime, runtime.control.view.admins[admin.id])
    assert key is not None   # an account exists only with a store, and so a server secret
    return key


def account_key(runtime: "Runtime", record: AdminRecord) -> bytes | None:
    base = runtime.control.derived_key("console-session")
    if base is None:
        return None
    return hmac.new(base, f"{record.id}:{record.prefix}".encode(), hashlib.sha256).digest()


def authenticate(runtime: "Runtime", scope: Mapping[str, Any]) -> Admin:
    """A bearer token, or the console's session cookie (with its CSRF token on a change)."""
    given = session.header(scope["headers"], b"authorization")
    if given is not None:
        scheme, _, credential = given.partition(" ")
        admin = of_token(runtime, credential.strip()) if scheme.lower() == "bearer" else None
        if admin is None:
            raise AuthenticationError("The admin API needs 'Authorization: Bearer <admin.token or an "
                                      "administrator's token>'")
        return admin
    cookie = session.session_cookie(scope["headers"])
    found = None if cookie is None else of_session(runtime, cookie, time.time())
    if cookie is None or found is None:
        raise AuthenticationError("The admin API needs 'Authorization: Bearer <admin.token or an "
                                  "administrator's token>' (or the console's login)")
    admin, key = found
    if scope["method"] not in session.SAFE_METHODS:
        csrf = session.header(scope["headers"], session.CSRF_HEADER)
        if csrf is None or not session.valid_csrf(key, cookie, csrf):
            raise PermissionDenied("A change made with the console's login needs its 'x-csrf-token' header",
                                   code="csrf_token_invalid")
    return admin
