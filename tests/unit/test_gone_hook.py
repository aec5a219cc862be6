"""The server's word that a client left (protocol/http/asgi.py: GoneHook, ClientLink.subscribe); the server's
side that fires it is tested end to end in tests/e2e/test_client_eof_e2e.py."""

from __future__ import annotations

import logging

from switchyard.protocol.http.asgi import CLIENT_GONE, GoneHook, disconnect_waiter


async def never() -> dict:
    raise AssertionError("a subscribed call never waits on receive()")


def test_a_call_subscribes_where_the_scope_holds_the_servers_hook():
    hook, told = GoneHook(), []
    link = disconnect_waiter(never, {"type": "http", "extensions": {CLIENT_GONE: hook}})
    assert link.subscribe(lambda: told.append(1)) is True
    hook.fire()
    assert told == [1]


def test_without_the_servers_hook_a_call_is_told_to_wait_itself():
    for scope in ({"type": "http"}, {"type": "http", "extensions": None}, {"type": "http", "extensions": {}}, None):
        assert disconnect_waiter(never, scope).subscribe(lambda: None) is False


def test_a_callback_that_fails_is_logged_and_the_server_goes_on(caplog):
    hook = GoneHook()
    hook.callback = lambda: 1 / 0
    with caplog.at_level(logging.ERROR, logger="switchyard"):
        hook.fire()
    assert "telling a call that its client left failed" in caplog.text and "ZeroDivisionError" in caplog.text
