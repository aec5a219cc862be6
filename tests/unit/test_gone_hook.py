"""The server's word that a client left (protocol/http/asgi.py: GoneHook, ClientLink.subscribe); the server's
side that fires it is tested end to end in tests/e2e/test_client_eof_e2e.py."""

from __future__ import annotations

import logging

import trio
import trio.testing

from switchyard.protocol.http.asgi import CLIENT_GONE, GoneHook, disconnect_waiter


async def never() -> dict:
    raise AssertionError("a subscribed call never waits on receive()")


async def test_a_call_subscribes_where_the_scope_holds_the_servers_hook():
    hook, told = GoneHook(), []
    link = disconnect_waiter(never, {"type": "http", "extensions": {CLIENT_GONE: hook}})
    assert link.subscribe(lambda: told.append(1)) is True
    hook.fire()
    await trio.testing.wait_all_tasks_blocked()
    assert told == [1]


def test_without_the_servers_hook_a_call_is_told_to_wait_itself():
    for scope in ({"type": "http"}, {"type": "http", "extensions": None}, {"type": "http", "extensions": {}}, None):
        assert disconnect_waiter(never, scope).subscribe(lambda: None) is False


async def told_after_a_last_write() -> list[str]:
    """One client closing on a call that is runnable after its last write: what happened, in order."""
    hook, order, wrote = GoneHook(), [], trio.Event()
    hook.callback = lambda: order.append("told")

    async def call() -> None:
        wrote.set()
        await trio.lowlevel.cancel_shielded_checkpoint()   # the last write's own yield
        order.append("finished")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await wrote.wait()
        hook.fire()   # the server saw the client close while the call is runnable
    await trio.testing.wait_all_tasks_blocked()
    return order


async def test_a_call_that_has_just_written_its_last_bytes_marks_its_answer_finished_before_it_is_told():
    """A client may close the moment it read the last event (the openai SDK does after ``[DONE]``): the call,
    runnable again after that write, runs before the hook's word reaches it. Twenty rounds: the run loop's
    order among tasks runnable together varies, and the word must come last in every one."""
    for _ in range(20):
        assert await told_after_a_last_write() == ["finished", "told"]


async def test_a_callback_that_fails_is_logged_and_the_run_goes_on(caplog):
    hook = GoneHook()
    hook.callback = lambda: 1 / 0
    with caplog.at_level(logging.ERROR, logger="switchyard"):
        hook.fire()
        await trio.testing.wait_all_tasks_blocked()
    assert "telling a call that its client left failed" in caplog.text and "ZeroDivisionError" in caplog.text
