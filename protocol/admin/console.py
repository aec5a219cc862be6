"""``/admin/ui/``: the operator console, pages in the browser over the admin JSON API.

The pages are a thin shell rendered here (a title, the navigation, the
session's CSRF token) and a little hand-written JavaScript in ``ui/`` that
reads the same ``/admin/*`` JSON a script would, puts every value in the page
as text (never as markup) and draws its charts as SVG. Everything ships in
the package: no CDN, no font, no build step, so the console works with no
internet.

Every answer carries a strict Content-Security-Policy: scripts, styles and
fetches from this origin only, no inline script or style, no framing. The
login form trades ``admin.token``, or an administrator's token, for the
session cookie naming that administrator (``session.py``, ``identity.py``);
a page asked for without a valid session sends the browser to the form.
The embedded demo's printed link (``?token=``, ``serving/demo_console.py``)
is traded the same way, then the browser is sent on without it.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable
from urllib.parse import parse_qsl, quote, urlencode

import trio

from switchyard.actors.errors import MethodNotAllowed, PermissionDenied, RouteNotFound
from switchyard.actors.ledger.record import RECORD_ENDPOINTS
from switchyard.protocol.admin import identity, session
from switchyard.protocol.http.asgi import read_body

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

Send = Callable[[dict[str, Any]], Awaitable[None]]

PREFIX = "/admin/ui"
UI = Path(__file__).with_name("ui")
# page -> its title, in the navigation's order; the first is the console's home
PAGES = {"backends": "Backends", "traffic": "Traffic", "usage": "Usage and spend", "request": "One request",
         "keys": "Keys", "organizations": "Organizations", "audit": "Audit", "config": "Config"}
ASSET_TYPES = {".css": b"text/css; charset=utf-8", ".js": b"text/javascript; charset=utf-8",
               ".png": b"image/png", ".svg": b"image/svg+xml"}
LOGIN_BODY_LIMIT = 4096
WRONG_TOKEN_PAUSE = 1.0   # seconds a wrong token waits for its answer: guessing is slow
STALE_LINK = "That link's token is not this run's: each start of the demo prints a new link."
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


def _assets() -> dict[str, tuple[bytes, bytes, bytes]]:
    """name -> (content, content type, ETag) of every static file, read once."""
    out = {}
    for path in sorted(UI.iterdir()):
        kind = ASSET_TYPES.get(path.suffix)
        if kind is not None and path.is_file():
            content = path.read_bytes()
            out[path.name] = (content, kind, f'"{hashlib.sha256(content).hexdigest()[:16]}"'.encode())
    return out


ASSETS = _assets()
SHELL = (UI / "shell.html").read_text(encoding="utf-8")
ENDPOINTS = html.escape(" ".join(RECORD_ENDPOINTS))   # the ledger's endpoint values, one list for API and pages
LOGIN = (UI / "login.html").read_text(encoding="utf-8")


class ConsoleUi:
    """Answers every path under PREFIX; the admin API hands them over before its own token check."""

    def __init__(self, link_login: bool = False) -> None:
        # The embedded demo's printed link carries its token of one run (?token=): taken only then, never an
        # operator's admin.token (a URL lands in browser history and in proxies' logs).
        self.link_login = link_login
        # Wrong tokens wait their pause one after another: guesses sent in parallel get no faster than one a
        # second per worker. The right token never waits behind them.
        self._wrong_tokens = trio.Lock()

    async def handle(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Send) -> None:
        token = runtime.snapshot.admin.token   # None: only the database's administrators log in
        path, method = scope["path"], scope["method"]
        if path == PREFIX:
            await _answer(send, 308, b"", [(b"location", b"ui/")])
            return
        name = path[len(PREFIX) + 1:]
        if name.startswith("static/"):
            self._allow(method, path, ("GET", "HEAD"))
            await self.asset(scope, name[len("static/"):], send)
        elif name == "login":
            self._allow(method, path, ("GET", "POST"))
            if method == "POST":
                await self.login(runtime, scope, receive, send)
            else:
                await self.login_page(scope, send, "")
        elif name == "logout":
            self._allow(method, path, ("POST",))
            await self.logout(runtime, scope, receive, send)
        elif name in ("", *PAGES):
            self._allow(method, path, ("GET", "HEAD"))
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            if self.link_login and method == "GET" and any(key == "token" for key, _ in query):
                await self.link(scope, name, query, send, token)
            else:
                await self.page(runtime, scope, name or next(iter(PAGES)), send)
        else:
            raise RouteNotFound(f"No console page at {path}")

    @staticmethod
    def _allow(method: str, path: str, allowed: tuple[str, ...]) -> None:
        if method not in allowed:
            raise MethodNotAllowed(f"{method} is not allowed on {path}", allowed=allowed)

    async def asset(self, scope: dict[str, Any], name: str, send: Send) -> None:
        found = ASSETS.get(name)
        if found is None:
            raise RouteNotFound(f"No console file named '{name}'")
        content, kind, etag = found
        headers = [(b"content-type", kind), (b"etag", etag), (b"cache-control", b"no-cache")]
        if session.header(scope["headers"], b"if-none-match") == etag.decode():
            await _answer(send, 304, b"", headers)
        else:
            await _answer(send, 200, b"" if scope["method"] == "HEAD" else content, headers)

    async def page(self, runtime: "Runtime", scope: dict[str, Any], name: str, send: Send) -> None:
        cookie = session.session_cookie(scope["headers"])
        found = None if cookie is None else identity.of_session(runtime, cookie, time.time())
        if cookie is None or found is None:
            await _answer(send, 303, b"", [(b"location", f"login?next={quote(name)}".encode()),
                                            (b"cache-control", b"no-store")])
            return
        current = ' aria-current="page"'
        nav = "".join(f'<a href="{page}"{current if page == name else ""}>{html.escape(title)}</a>'
                      for page, title in PAGES.items())
        body = (SHELL.replace("{{title}}", html.escape(PAGES[name]))
                .replace("{{page}}", html.escape(name))
                .replace("{{csrf}}", html.escape(session.csrf_token(found[1], cookie)))
                .replace("{{role}}", html.escape(found[0].role))   # the page offers only what the role may do
                .replace("{{endpoints}}", ENDPOINTS)   # the usage and traffic pages' endpoint filter
                .replace("{{nav}}", nav))
        await _answer(send, 200, b"" if scope["method"] == "HEAD" else body.encode(),
                      [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store")])

    async def login_page(self, scope: dict[str, Any], send: Send, message: str, status: int = 200) -> None:
        params = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        body = (LOGIN.replace("{{next}}", html.escape(_next_page(params.get("next"))))
                .replace("{{message}}", html.escape(message)))
        await _answer(send, status, body.encode(),
                      [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store")])

    async def login(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Send) -> None:
        """The form's token (``admin.token`` or an administrator's) for a session cookie naming its
        administrator, then on to the page asked for; a wrong token waits, then 401."""
        raw = await read_body(scope, receive, LOGIN_BODY_LIMIT, runtime.snapshot.server)
        form = dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
        admin = identity.of_token(runtime, form.get("token", "").strip())
        if admin is None:
            async with self._wrong_tokens:
                await trio.sleep(WRONG_TOKEN_PAUSE)
            await self.login_page({**scope, "query_string": f"next={quote(form.get('next', ''))}".encode()},
                                  send, "That is not the admin token.", 401)
            return
        cookie = session.new_session(identity.session_key(runtime, admin), time.time(), admin.id)
        await _answer(send, 303, b"", [(b"location", _next_page(form.get("next")).encode()),
                                       (b"set-cookie", session.set_cookie(cookie, session.over_https(scope))),
                                       (b"cache-control", b"no-store")])

    async def link(self, scope: dict[str, Any], name: str, query: list[tuple[str, str]], send: Send,
                   token: str | None) -> None:
        """The demo's printed link: its token for the session cookie at once, then the same page without the
        token, so it does not stay in the address bar; a wrong token waits as the form's does, then 401."""
        given = [value for key, value in query if key == "token"]
        if token is None or len(given) != 1 or not hmac.compare_digest(given[0].encode(), token.encode()):
            async with self._wrong_tokens:
                await trio.sleep(WRONG_TOKEN_PAUSE)
            await self.login_page({**scope, "query_string": f"next={quote(name)}".encode()}, send,
                                  STALE_LINK, 401)
            return
        rest = urlencode([(key, value) for key, value in query if key != "token"])
        location = (name or "./") + (f"?{rest}" if rest else "")
        cookie = session.new_session(token, time.time())
        await _answer(send, 303, b"", [(b"location", location.encode()),
                                       (b"set-cookie", session.set_cookie(cookie, session.over_https(scope))),
                                       (b"cache-control", b"no-store")])

    async def logout(self, runtime: "Runtime", scope: dict[str, Any], receive: Any, send: Send) -> None:
        """Forget the cookie (the form carries the page's CSRF token: another site cannot log you out; a
        session no longer valid is simply forgotten)."""
        cookie = session.session_cookie(scope["headers"])
        raw = await read_body(scope, receive, LOGIN_BODY_LIMIT, runtime.snapshot.server)
        form = dict(parse_qsl(raw.decode("utf-8", "replace")))
        found = None if cookie is None else identity.of_session(runtime, cookie, time.time())
        if cookie is not None and found is not None and not session.valid_csrf(found[1], cookie, form.get("csrf", "")):
            raise PermissionDenied("Logging out needs the page's CSRF token", code="csrf_token_invalid")
        await _answer(send, 303, b"", [(b"location", b"login"),
                                       (b"set-cookie", session.clear_cookie(session.over_https(scope)))])


def _next_page(wanted: str | None) -> str:
    """Where a login goes on to: a console page by name, never a URL (no open redirect)."""
    return wanted if wanted in PAGES else next(iter(PAGES))


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers = [*headers, *SECURITY_HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
