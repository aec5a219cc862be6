"""The console's access rules (docs/console.md#how-access-is-protected), driven in memory: the login, the
session cookie, CSRF on changes, the security headers, and the console off with the admin API."""

from __future__ import annotations

import re

import trio

from switchyard.protocol.admin import session
from switchyard.protocol.admin.console import CSP, WRONG_TOKEN_PAUSE
from tests.harness import gateway, request

TOKEN = "console-admin-token-0123456789"
CONFIG = f"""
admin:
  token: "{TOKEN}"
backends:
  - name: sim-a
    type: simulated
    models: [demo]
"""
FORM = [(b"content-type", b"application/x-www-form-urlencoded")]


async def login(app, token: str = TOKEN, next_page: str = "usage"):
    return await request(app, "POST", "/admin/ui/login", f"token={token}&next={next_page}".encode(), FORM)


def cookie_of(reply) -> str:
    found = re.match(rf"{session.COOKIE}=([^;]*)", reply.headers[b"set-cookie"].decode())
    assert found is not None
    return found.group(1)


def with_cookie(value: str, *more: tuple[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return [(b"cookie", f"other=1; {session.COOKIE}={value}".encode()), *more]


async def test_console_is_off_while_admin_token_is_unset():
    async with gateway("backends:\n  - {name: a, type: simulated, models: [demo]}\n") as app:
        for path in ("/admin/ui/", "/admin/ui/login", "/admin/ui/static/console.js"):
            assert (await request(app, "GET", path)).status == 404


async def test_login_trades_the_token_for_an_httponly_samesite_cookie_and_goes_on_to_the_page():
    async with gateway(CONFIG) as app:
        reply = await login(app)
        assert reply.status == 303
        assert reply.headers[b"location"] == b"usage"
        cookie = reply.headers[b"set-cookie"].decode()
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie   # plain HTTP here
        assert TOKEN not in cookie      # the token itself never leaves the form
        page = await request(app, "GET", "/admin/ui/usage", headers=with_cookie(cookie_of(reply)))
        assert page.status == 200
        assert b'src="static/usage.js"' in page.body


async def test_the_cookie_is_secure_when_the_browser_came_over_https():
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/admin/ui/login", f"token={TOKEN}".encode(),
                              [*FORM, (b"x-forwarded-proto", b"https")])
        assert "; Secure" in reply.headers[b"set-cookie"].decode()


async def test_a_wrong_token_waits_then_answers_401_with_the_form(autojump_clock):
    async with gateway(CONFIG) as app:
        began = trio.current_time()
        reply = await login(app, token="guess")
        assert trio.current_time() - began == WRONG_TOKEN_PAUSE
        assert reply.status == 401
        assert b"set-cookie" not in reply.headers
        assert b"That is not the admin token." in reply.body


async def test_wrong_tokens_sent_together_wait_one_after_another_and_the_right_one_never_waits(autojump_clock):
    async with gateway(CONFIG) as app:
        began = trio.current_time()
        ended: list[tuple[str, float, int]] = []

        async def attempt(token: str) -> None:
            reply = await login(app, token=token)
            ended.append((token, trio.current_time() - began, reply.status))

        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(attempt, f"guess-{n}")
            await trio.sleep(0.1)
            nursery.start_soon(attempt, TOKEN)
        assert sorted(t for _, t, status in ended if status == 401) == [WRONG_TOKEN_PAUSE * k for k in (1, 2, 3)]
        assert [(t, status) for token, t, status in ended if token == TOKEN] == [(0.1, 303)]


async def test_login_goes_on_only_to_a_console_page_never_to_a_url():
    async with gateway(CONFIG) as app:
        reply = await login(app, next_page="https://elsewhere.example/")
        assert reply.headers[b"location"] == b"backends"


async def test_a_page_without_a_session_sends_the_browser_to_the_login_form():
    async with gateway(CONFIG) as app:
        reply = await request(app, "GET", "/admin/ui/traffic")
        assert reply.status == 303
        assert reply.headers[b"location"] == b"login?next=traffic"
        forged = await request(app, "GET", "/admin/ui/traffic", headers=with_cookie("9999999999.00ff"))
        assert forged.status == 303


async def test_an_expired_session_is_refused():
    async with gateway(CONFIG) as app:
        old = session.new_session(TOKEN, now=1_000_000)   # expired decades ago
        reply = await request(app, "GET", "/admin/backends", headers=with_cookie(old))
        assert reply.status == 401


async def test_a_session_made_with_another_token_is_refused():
    async with gateway(CONFIG) as app:
        import time
        other = session.new_session("another-token-0123456789", time.time())
        assert (await request(app, "GET", "/admin/backends", headers=with_cookie(other))).status == 401


async def test_the_session_cookie_reads_the_admin_json_api():
    async with gateway(CONFIG) as app:
        value = cookie_of(await login(app))
        reply = await request(app, "GET", "/admin/backends", headers=with_cookie(value))
        assert reply.status == 200
        assert [b["name"] for b in reply.json()["backends"]] == ["sim-a"]


async def test_a_change_made_with_the_cookie_needs_the_pages_csrf_token():
    async with gateway(CONFIG) as app:
        value = cookie_of(await login(app))
        refused = await request(app, "POST", "/admin/config/reload", headers=with_cookie(value))
        assert refused.status == 403
        assert refused.json()["error"]["code"] == "csrf_token_invalid"
        wrong = await request(app, "POST", "/admin/config/reload",
                              headers=with_cookie(value, (b"x-csrf-token", b"0" * 64)))
        assert wrong.status == 403
        page = await request(app, "GET", "/admin/ui/config", headers=with_cookie(value))
        csrf = re.search(rb'name="csrf-token" content="([0-9a-f]{64})"', page.body).group(1)
        allowed = await request(app, "POST", "/admin/config/reload",
                                headers=with_cookie(value, (b"x-csrf-token", csrf)))
        # the in-memory gateway has no file: the reload itself answers why, past the CSRF check
        assert allowed.status == 409
        assert allowed.json()["result"] == "unavailable"


async def test_a_bearer_token_needs_no_csrf_token():
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/admin/config/reload",
                              headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
        assert reply.status == 409


async def test_logout_needs_the_pages_csrf_token_and_clears_the_cookie():
    async with gateway(CONFIG) as app:
        value = cookie_of(await login(app))
        refused = await request(app, "POST", "/admin/ui/logout", b"csrf=nope", with_cookie(value, *FORM))
        assert refused.status == 403
        csrf = session.csrf_token(TOKEN, value)
        reply = await request(app, "POST", "/admin/ui/logout", f"csrf={csrf}".encode(), with_cookie(value, *FORM))
        assert reply.status == 303
        assert reply.headers[b"set-cookie"].decode().startswith(f"{session.COOKIE}=; Path=/; Max-Age=0")


async def test_every_console_answer_carries_a_strict_content_security_policy():
    async with gateway(CONFIG) as app:
        value = cookie_of(await login(app))
        for path, headers in (("/admin/ui/login", []), ("/admin/ui/", with_cookie(value)),
                              ("/admin/ui/static/console.js", []), ("/admin/ui/backends", [])):
            reply = await request(app, "GET", path, headers=headers)
            assert reply.headers[b"content-security-policy"] == CSP.encode()
            assert reply.headers[b"x-content-type-options"] == b"nosniff"
            assert reply.headers[b"x-frame-options"] == b"DENY"
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "frame-ancestors 'none'" in CSP


async def test_pages_carry_no_inline_script_or_style():
    async with gateway(CONFIG) as app:
        value = cookie_of(await login(app))
        for page in ("backends", "traffic", "usage", "request", "config"):
            body = (await request(app, "GET", f"/admin/ui/{page}", headers=with_cookie(value))).body.decode()
            assert re.findall(r"<script(?![^>]*\bsrc=)", body) == []
            assert "<style" not in body and " style=" not in body and "onclick" not in body
        login_page = (await request(app, "GET", "/admin/ui/login")).body.decode()
        assert "<script" not in login_page


async def test_static_files_are_served_from_the_package_with_an_etag():
    async with gateway(CONFIG) as app:
        first = await request(app, "GET", "/admin/ui/static/charts.js")
        assert first.status == 200
        assert first.headers[b"content-type"] == b"text/javascript; charset=utf-8"
        again = await request(app, "GET", "/admin/ui/static/charts.js",
                              headers=[(b"if-none-match", first.headers[b"etag"])])
        assert again.status == 304 and again.body == b""
        assert (await request(app, "GET", "/admin/ui/static/../api.py")).status == 404
        assert (await request(app, "GET", "/admin/ui/static/shell.html")).status == 404


async def test_the_console_root_without_its_slash_redirects_to_it():
    async with gateway(CONFIG) as app:
        reply = await request(app, "GET", "/admin/ui")
        assert reply.status == 308
        assert reply.headers[b"location"] == b"ui/"


async def test_a_login_form_value_with_markup_is_escaped_in_the_page():
    async with gateway(CONFIG) as app:
        reply = await request(app, "GET", "/admin/ui/login?next=%22%3E%3Cscript%3Ealert(1)%3C/script%3E")
        assert b"<script>alert" not in reply.body
        assert b'name="next" value="backends"' in reply.body


async def test_a_cookie_whose_expiry_is_not_ascii_digits_is_refused_not_an_error():
    async with gateway(CONFIG) as app:
        # the cookie header is read as latin-1, where "²" (0xB2) counts as a digit to str.isdigit but not to int
        for forged in ("\u00b2.00ff", "\u00b9\u00b3.00ff"):
            reply = await request(app, "GET", "/admin/backends",
                                  headers=[(b"cookie", f"{session.COOKIE}={forged}".encode("latin-1"))])
            assert reply.status == 401
            page = await request(app, "GET", "/admin/ui/backends",
                                 headers=[(b"cookie", f"{session.COOKIE}={forged}".encode("latin-1"))])
            assert page.status == 303


async def test_admin_json_answers_are_never_cached_nor_sniffed():
    async with gateway(CONFIG) as app:
        for path in ("/admin/backends", "/admin/config", "/admin/keys"):
            reply = await request(app, "GET", path, headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
            assert reply.status == 200
            assert reply.headers[b"cache-control"] == b"no-store"
            assert reply.headers[b"x-content-type-options"] == b"nosniff"
