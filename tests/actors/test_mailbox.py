"""Tell drops and counts when full; ask waits under a deadline."""

import pytest
import trio

from switchyard.actors.mailbox import AskTimeout, Mailbox, Reply, ask


async def test_tell_drops_and_counts_when_full():
    box = Mailbox("t", capacity=2)
    assert [box.tell(i) for i in range(4)] == [True, True, False, False]
    assert box.dropped == 2
    assert [box.inbox.receive_nowait(), box.inbox.receive_nowait()] == [0, 1]


async def test_ask_gets_the_answer(nursery):
    box = Mailbox("q")

    async def serve():
        async for reply in box.inbox:
            reply.answer("pong")
    nursery.start_soon(serve)
    assert await ask(box, lambda reply: reply, timeout=1) == "pong"


async def test_ask_times_out_at_deadline(autojump_clock):
    box = Mailbox("silent")
    t0 = trio.current_time()
    with pytest.raises(AskTimeout):
        await ask(box, lambda reply: reply, timeout=2.5)
    assert trio.current_time() - t0 == 2.5


async def test_answer_after_asker_left_is_harmless():
    reply = Reply()
    reply.answer(1)
    reply.answer(2)
    assert await reply.wait(1) == 1
