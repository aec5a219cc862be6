"""The embedded demo's console link (docs/console.md#the-demos-link), driven in memory: its token is traded for
the session cookie and the browser is sent on without it; a wrong one waits like the form's; the cookie it
gives still needs the page's CSRF token for a change; an operator's admin.token is never taken from a URL."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

import trio

from switchyard.config.load import load_demo, load_text
from switchyard.config.schema import Snapshot
from switchyard.protocol.admin.console import STALE_LINK, WRONG_TOKEN_PAUSE
from switchyard.protocol.serving.app import App
from switchyard.protocol.serving.demo_console import with_admin_token
from switchyard.protocol.serving.wiring import new_runtime
from tests.actors.test_console_access import CONFIG, TOKEN, cookie_of, with_cookie
from tests.harness import request


@asynccontextmanager
async def served(snapshot: Snapshot, link_login: bool) -> AsyncIterator[App]:
    """``snapshot`` behind an App as ``create_app`` builds it (``link_login``: the demo's run with its link)."""
    async with trio.open_nursery() as nursery:
        runtime = await nursery.start(new_runtime(snapshot).run)
        yield App(lambda: snapshot, runtime=runtime, link_login=link_login)
        nursery.cancel_scope.cancel()


def demo() -> Snapshot:
    return with_admin_token(load_demo().snapshot, TOKEN)


async def test_the_link_trades_its_token_for_the_cookie_and_sends_the_browser_on_without_it():
    async with served(demo(), link_login=True) as app:
        reply = await request(app, "GET", f"/admin/ui/?token={TOKEN}")
        assert reply.status == 303
        assert reply.headers[b"location"] == b"./"
        assert reply.headers[b"cache-control"] == b"no-store"
        cookie = reply.headers[b"set-cookie"].decode()
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        page = await request(app, "GET", "/admin/ui/", headers=with_cookie(cookie_of(reply)))
        assert page.status == 200
        assert b'src="static/backends.js"' in page.body


async def test_the_link_keeps_the_pages_other_parameters():
    async with served(demo(), link_login=True) as app:
        reply = await request(app, "GET", f"/admin/ui/request?token={TOKEN}&id=req_1")
        assert reply.status == 303
        assert reply.headers[b"location"] == b"request?id=req_1"


async def test_a_session_from_the_link_still_needs_the_pages_csrf_token_for_a_change():
    async with served(demo(), link_login=True) as app:
        reply = await request(app, "GET", f"/admin/ui/?token={TOKEN}")
        refused = await request(app, "POST", "/admin/config/reload", headers=with_cookie(cookie_of(reply)))
        assert refused.status == 403
        assert refused.json()["error"]["code"] == "csrf_token_invalid"


async def test_a_wrong_link_token_waits_then_answers_the_form_with_401(autojump_clock):
    async with served(demo(), link_login=True) as app:
        began = trio.current_time()
        reply = await request(app, "GET", "/admin/ui/usage?token=a-token-of-an-earlier-run")
        assert trio.current_time() - began == WRONG_TOKEN_PAUSE
        assert reply.status == 401
        assert b"set-cookie" not in reply.headers
        assert STALE_LINK.replace("'", "&#x27;").encode() in reply.body
        assert b'name="next" value="usage"' in reply.body


async def test_an_operators_admin_token_is_never_taken_from_a_url():
    async with served(load_text(CONFIG).snapshot, link_login=False) as app:
        reply = await request(app, "GET", f"/admin/ui/?token={TOKEN}")
        assert reply.status == 303
        assert reply.headers[b"location"] == b"login?next=backends"
        assert b"set-cookie" not in reply.headers
