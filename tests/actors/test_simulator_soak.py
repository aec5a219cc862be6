"""A soak of the embedded demo (in-process, MockClock): its simulated backends keep nothing per call, so
the memory their modules hold stays flat however long the demo runs."""

import gc
import tracemalloc
from importlib import resources

import httpx

from tests.harness import chat, gateway, request

WARM_UP, CALLS, TRACED = 200, 2000, 300   # tracemalloc makes a call four times slower: a window of it
SIMULATED = "*/protocol/simulated*.py"


def held_by_simulators(snapshot: tracemalloc.Snapshot) -> int:
    return sum(s.size for s in snapshot.filter_traces([tracemalloc.Filter(True, SIMULATED)]).statistics("filename"))


def live_requests() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is httpx.Request)


async def test_the_demo_simulators_memory_stays_flat_over_thousands_of_calls(autojump_clock):
    demo = resources.files("switchyard.config").joinpath("demo.yaml").read_text(encoding="utf-8")
    async with gateway(demo) as app:
        sims = list(app.runtime.upstream.simulated.values())
        for i in range(WARM_UP + CALLS):
            assert (await request(app, "POST", "/v1/chat/completions", chat(stream=i % 10 == 0))).status == 200
        assert live_requests() < 50        # no request is retained anywhere (about 2.8 KB each)
        tracemalloc.start()
        try:
            before = held_by_simulators(tracemalloc.take_snapshot())
            for i in range(TRACED):
                assert (await request(app, "POST", "/v1/chat/completions", chat(stream=i % 10 == 0))).status == 200
            grown = held_by_simulators(tracemalloc.take_snapshot()) - before
        finally:
            tracemalloc.stop()
        assert sum(s.served for s in sims) == WARM_UP + CALLS + TRACED
        assert grown < 8 * 1024, grown     # a kept history is over 100 bytes a call: 30+ KB here
