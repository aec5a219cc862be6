"""End-to-end: two simulated engines expose /metrics with different queue depths; through the
official openai SDK on a real socket, traffic shifts to the idle one once the dead band is crossed."""

from __future__ import annotations

import re

import openai
import trio

from switchyard.config.schema import SimulatedEngine
from tests.e2e.support import backend, gateway_config, in_thread


def engine(name: str, waiting: int) -> dict:
    b = backend(name)
    b["simulation"]["engine"] = {"kind": "vllm", "waiting": waiting, "kv_cache_usage": 0.2}
    return b


async def test_traffic_shifts_to_the_idle_engine_through_the_sdk(start_gateway):
    gw = await start_gateway(gateway_config(
        engine("busy", 20), engine("idle", 10),
        engine_stats={"enabled": True, "interval": "1s"},
        routing={"engine_load": {"enabled": True, "balance_abs_threshold": 64, "balance_rel_threshold": 1.5}},
    ))
    client = openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)

    def served() -> set[str]:
        out = set()
        for _ in range(4):
            reply = client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hi"}])
            out.add(re.search(r"Hello from (\w+)", reply.choices[0].message.content).group(1))
        return out

    with client:
        before = await in_thread(served)                 # 20 vs 10 waiting: inside the dead band
        # from the next poll on, `busy` reports 200 waiting: past both thresholds
        gw.sim("busy").metrics_script.extend([SimulatedEngine(waiting=200, kv_cache_usage=0.2)] * 5)
        with trio.fail_after(5):
            while gw.app.runtime.engine_stats.view["busy"].waiting != 200:
                await trio.sleep(0.05)
        after = await in_thread(served)
    assert before == {"busy", "idle"}
    assert after == {"idle"}
