"""Batches (the Redis limiter's group commit) at exact virtual instants: what goes together, how long a
caller waits, and what is reported lost. ``send`` here is a function the test controls, standing for
one script call; the limiter's own tests run it against a real Redis."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel

from switchyard.protocol.stores.redis_batch import Batches, LoopLag


class Server:
    """Answers each item with ("ok", item) after ``delay[item]`` seconds (default ``default``)."""

    def __init__(self, default: float = 0.001, **delay: float) -> None:
        self.default = default
        self.delay = delay
        self.sent: list[list[str]] = []
        self.lost: list[tuple[str, Any]] = []
        self.fail: Exception | None = None

    async def send(self, items: list[str]) -> list[Any]:
        self.sent.append(list(items))
        await trio.sleep(max(self.delay.get(i, self.default) for i in items))
        if self.fail is not None:
            raise self.fail
        return [("ok", i) for i in items]

    def batches(self, most: int = 64, lanes: int = 2) -> Batches[str]:
        return Batches(self.send, lambda item, reply: self.lost.append((item, reply)), most=most, lanes=lanes)


async def started(nursery: trio.Nursery, batches: Batches[str]) -> Batches[str]:
    nursery.start_soon(batches.run)
    await trio.lowlevel.checkpoint()
    return batches


async def test_calls_arriving_while_a_batch_is_on_its_way_go_together_in_the_next(autojump_clock, nursery):
    server = Server(default=0.01)
    batches = await started(nursery, server.batches(lanes=1))
    replies: dict[str, Any] = {}

    async def ask(item: str) -> None:
        replies[item] = await batches.ask(item, 1.0, 5.0)

    async with trio.open_nursery() as n:
        n.start_soon(ask, "first")
        await trio.sleep(0.001)            # "first" is on its way, alone
        for i in range(20):
            n.start_soon(ask, f"c{i}")
    assert server.sent[0] == ["first"] and sorted(server.sent[1]) == sorted(f"c{i}" for i in range(20))
    assert replies == {item: ("ok", item) for item in replies} and len(replies) == 21
    assert (batches.batches, batches.items, batches.waiting) == (2, 21, 0)


async def test_a_batch_carries_at_most_most_items(autojump_clock, nursery):
    server = Server()
    batches = await started(nursery, server.batches(most=8, lanes=1))
    async with trio.open_nursery() as n:
        for i in range(20):
            n.start_soon(batches.ask, f"c{i}", 1.0, 5.0)
    assert [len(b) for b in server.sent] == [1, 8, 8, 3]   # the first found nothing waiting: it went alone


async def test_a_call_with_nothing_waiting_goes_at_once_alone(autojump_clock, nursery):
    server = Server()
    batches = await started(nursery, server.batches())
    assert await batches.ask("quick", 0.1, 1.0) == ("ok", "quick")
    assert trio.current_time() == pytest.approx(0.001) and server.sent == [["quick"]]


async def test_a_call_sent_alone_ends_at_its_bound_when_nothing_else_is_answered(autojump_clock, nursery):
    server = Server(slow=0.3)
    batches = await started(nursery, server.batches())
    with pytest.raises(trio.TooSlowError):
        await batches.ask("slow", 0.1, 1.0)
    assert trio.current_time() == pytest.approx(0.1)
    assert server.lost == [("slow", None)]   # cut off on its way: it may have run, so it is reported lost


async def test_a_call_sent_alone_is_given_its_bound_again_while_the_server_answers_others(autojump_clock,
                                                                                        nursery):
    server = Server(slow=0.3)
    batches = await started(nursery, server.batches())
    assert await batches.ask("slow", 0.1, 1.0, alive=lambda: True) == ("ok", "slow")
    assert trio.current_time() == pytest.approx(0.3) and batches.extended == 2 and server.lost == []


async def test_a_reply_arriving_as_the_bound_ends_counts_for_a_call_sent_alone(autojump_clock, nursery):
    server = Server(edge=0.1)
    batches = await started(nursery, server.batches())
    for _ in range(20):   # the reply and the bound's end wake in one turn of the loop, in a random order
        assert await batches.ask("edge", 0.1, 1.0) == ("ok", "edge")
    assert server.lost == []


async def test_a_reply_arriving_as_the_bound_ends_counts_for_a_queued_call(autojump_clock, nursery):
    server = Server(default=0.0625)   # binary fractions: the sums below are exact, the instants equal
    batches = await started(nursery, server.batches(lanes=1))
    for _ in range(20):
        async with trio.open_nursery() as n:
            n.start_soon(batches.ask, "first", 1.0, 5.0)   # alone, on the one lane until +0.0625
            await trio.lowlevel.checkpoint()
            assert await batches.ask("queued", 0.125, 5.0) == ("ok", "queued")   # answered at exactly +0.125
    assert server.lost == []


async def test_a_call_sent_alone_never_outlasts_its_cap(autojump_clock, nursery):
    server = Server(hung=5.0)
    batches = await started(nursery, server.batches())
    with pytest.raises(trio.TooSlowError):
        await batches.ask("hung", 0.1, 1.0, alive=lambda: True)
    assert trio.current_time() == pytest.approx(1.0)


async def test_each_call_sent_alone_ends_at_its_own_bound_whatever_the_others(autojump_clock, nursery):
    server = Server(first=5.0, second=5.0)
    batches = await started(nursery, server.batches(lanes=2))

    async def first() -> None:   # sent while the loop lagged: a long bound
        with pytest.raises(trio.TooSlowError):
            await batches.ask("first", 1.0, 5.0)

    nursery.start_soon(first)
    await trio.sleep(0.01)
    with pytest.raises(trio.TooSlowError):
        await batches.ask("second", 0.1, 5.0)
    assert trio.current_time() == pytest.approx(0.11)


async def test_a_queued_wait_ends_at_its_bound_when_nothing_else_is_answered(autojump_clock, nursery):
    server = Server(busy=0.05, slow=0.3)
    batches = await started(nursery, server.batches(lanes=1))
    nursery.start_soon(batches.ask, "busy", 1.0, 1.0)
    await trio.sleep(0.001)                   # "busy" holds the only lane until 0.05
    with pytest.raises(trio.TooSlowError):
        await batches.ask("slow", 0.1, 1.0)   # queued behind "busy", sent at 0.05
    assert trio.current_time() == pytest.approx(0.101)
    await trio.sleep(0.3)
    assert server.lost == [("slow", ("ok", "slow"))]   # it ran after its caller left: reported lost


async def test_a_queued_wait_is_extended_while_the_server_answers_others(autojump_clock, nursery):
    server = Server(busy=0.05, slow=0.3)
    batches = await started(nursery, server.batches(lanes=1))
    nursery.start_soon(batches.ask, "busy", 1.0, 1.0)
    await trio.sleep(0.001)
    assert await batches.ask("slow", 0.1, 1.0, alive=lambda: True) == ("ok", "slow")
    assert trio.current_time() == pytest.approx(0.35) and batches.extended == 3 and server.lost == []


async def test_no_queued_wait_outlasts_its_cap(autojump_clock, nursery):
    server = Server(busy=0.05, hung=5.0)
    batches = await started(nursery, server.batches(lanes=1))
    nursery.start_soon(batches.ask, "busy", 1.0, 1.0)
    await trio.sleep(0.001)
    with pytest.raises(trio.TooSlowError):
        await batches.ask("hung", 0.1, 1.0, alive=lambda: True)
    assert trio.current_time() == pytest.approx(1.001)


async def test_a_failed_batch_reaches_every_caller_and_each_item_is_reported_lost(autojump_clock, nursery):
    server = Server()
    server.fail = ConnectionError("reset")
    batches = await started(nursery, server.batches(lanes=1))
    errors: list[BaseException] = []

    async def ask(item: str) -> None:
        try:
            await batches.ask(item, 1.0, 5.0)
        except ConnectionError as exc:
            errors.append(exc)

    async with trio.open_nursery() as n:
        for item in ("a", "b"):
            n.start_soon(ask, item)
    assert len(errors) == 2 and sorted(server.lost) == [("a", None), ("b", None)]


async def test_a_call_whose_caller_left_before_it_was_sent_is_never_sent(autojump_clock, nursery):
    server = Server(busy=1.0)
    batches = await started(nursery, server.batches(lanes=1))
    nursery.start_soon(batches.ask, "busy", 5.0, 5.0)   # holds the only lane for 1 s
    await trio.sleep(0.01)
    with trio.move_on_after(0.5):
        await batches.ask("gone", 5.0, 5.0)
    await trio.sleep(1.0)
    assert server.sent == [["busy"]] and server.lost == []


async def test_loop_lag_is_how_late_a_due_task_wakes_then_decays(autojump_clock, nursery):
    lag = LoopLag(tick=0.01, decay=0.5)
    nursery.start_soon(lag.run)
    await trio.sleep(0.1)
    assert lag.seconds == pytest.approx(0.0, abs=1e-12)
    autojump_clock.jump(0.05)   # the loop stalls 50 ms: no task runs meanwhile
    await trio.sleep(0.001)
    assert 0.04 - 1e-9 <= lag.seconds <= 0.05 + 1e-9
    seen = lag.seconds
    await trio.sleep(0.1)       # ten ticks on time: halved at each
    assert lag.seconds == pytest.approx(seen / 2 ** 10, rel=0.2)
