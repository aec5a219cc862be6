"""Supervisor: restart with backoff at exact instants; a crash never escapes."""

import pytest
import trio

from switchyard.actors.supervisor import Supervisor


class Flaky:
    name = "flaky"

    def __init__(self, crashes):
        self.crashes = crashes
        self.starts = []

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED):
        self.starts.append(trio.current_time())
        task_status.started("ready")
        await trio.sleep(1)
        if len(self.starts) <= self.crashes:
            raise RuntimeError("boom")
        await trio.sleep_forever()


async def test_crashed_actor_restarts_with_doubling_backoff(autojump_clock, nursery):
    t0 = trio.current_time()
    sup = Supervisor(nursery, initial_backoff=0.5, max_backoff=4)
    actor = Flaky(crashes=5)
    assert await sup.start(actor) == "ready"
    await trio.sleep(60)
    # runs 1 s, crashes, waits 0.5, 1, 2, 4, 4 (capped) before each restart
    assert [s - t0 for s in actor.starts] == [0, 1.5, 3.5, 6.5, 11.5, 16.5]
    assert sup.restarts["flaky"] == 5


async def test_backoff_resets_after_stable_run(autojump_clock, nursery):
    class LongThenCrash(Flaky):
        async def run(self, *, task_status=trio.TASK_STATUS_IGNORED):
            self.starts.append(trio.current_time())
            task_status.started()
            await trio.sleep(100 if len(self.starts) == 3 else 1)
            raise RuntimeError("boom")

    t0 = trio.current_time()
    sup = Supervisor(nursery, initial_backoff=1, max_backoff=30, stable_after=60)
    actor = LongThenCrash(crashes=99)
    await sup.start(actor)
    await trio.sleep(106.5)
    # 0 (+1 run, 1 wait) 2 (+1 run, 2 wait) 5 (+100 run; stable, so wait 1) 106
    assert [s - t0 for s in actor.starts] == [0, 2, 5, 106]


async def test_crash_before_started_reaches_the_caller(autojump_clock, nursery):
    class Broken:
        name = "broken"

        async def run(self, *, task_status=trio.TASK_STATUS_IGNORED):
            raise ValueError("bad config")

    with pytest.raises(ValueError, match="bad config"):
        await Supervisor(nursery).start(Broken())


async def test_actor_crash_does_not_stop_siblings(autojump_clock, nursery):
    ticks = []

    class Ticker:
        name = "ticker"

        async def run(self, *, task_status=trio.TASK_STATUS_IGNORED):
            task_status.started()
            while True:
                ticks.append(trio.current_time())
                await trio.sleep(1)

    sup = Supervisor(nursery)
    await sup.start(Ticker())
    await sup.start(Flaky(crashes=100))
    await trio.sleep(10.5)
    assert len(ticks) == 11
