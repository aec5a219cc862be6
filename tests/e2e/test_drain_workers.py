"""A drain with several worker processes refuses new connections at once, while the calls in flight finish.

CI runs this file ten times over (``SWITCHYARD_REPEAT=10`` in ``.ci/run``): a
drain that refuses only most of the time is the defect this guards against.
"""

from __future__ import annotations

import os
import signal

import httpx
import pytest
import trio

from tests.e2e.support import backend, gateway_config, switchyard_serve

CHAT = {"model": "demo", "messages": [{"role": "user", "content": "hi"}], "stream": True}
REPEAT = int(os.environ.get("SWITCHYARD_REPEAT", "1"))
REFUSED_WITHIN = 0.1   # seconds from the signal: what a balancer health-checking by connect may expect


async def connect_outcome(port: int) -> str:
    """``refused``, ``accepted`` (the kernel completed the handshake: something listens), or ``hung``.

    The bound is generous: on two busy cores (workers loading) this process itself may wait
    for the CPU, and a slow answer is not the defect; a completed handshake is."""
    try:
        with trio.fail_after(0.5):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
    except trio.TooSlowError:
        return "hung"
    except OSError:
        return "refused"
    await stream.aclose()
    return "accepted"


async def stop_and_probe(proc: trio.Process, port: int, log_path) -> None:
    """SIGTERM, then the port probed every 10 ms for 0.5 s: refused within 100 ms, and no handshake after."""
    signalled = trio.current_time()
    proc.send_signal(signal.SIGTERM)
    outcomes: list[tuple[float, str]] = []
    while trio.current_time() - signalled < 0.5:
        outcomes.append((trio.current_time() - signalled, await connect_outcome(port)))
        await trio.sleep(0.01)
    refused = [at for at, outcome in outcomes if outcome == "refused"]
    assert refused and refused[0] <= REFUSED_WITHIN, (outcomes, log_path.read_text())
    late = [(at, outcome) for at, outcome in outcomes if at >= refused[0] and outcome == "accepted"]
    assert not late, (late, log_path.read_text())


async def exits_cleanly(proc: trio.Process, log_path) -> None:
    with trio.move_on_after(8):
        await proc.wait()
    assert proc.returncode == 0, log_path.read_text()


@pytest.mark.parametrize("round_", range(REPEAT))
async def test_a_drain_with_two_workers_refuses_new_connections_within_100_ms(tmp_path, round_):
    config = gateway_config(backend("sim-cli", tokens_per_second=10, chunks=10))  # about 1 s of stream
    config["server"] = {"shutdown_drain_timeout": "5s"}
    async with switchyard_serve(tmp_path, config, workers=2) as (proc, url, log_path):
        body = b""
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            async with http.stream("POST", "/v1/chat/completions", json=CHAT) as response:
                async for chunk in response.aiter_raw():
                    if not body:
                        await stop_and_probe(proc, int(url.rsplit(":", 1)[1]), log_path)
                    body += chunk
        assert body.endswith(b"data: [DONE]\n\n")   # the call in flight finished
        await exits_cleanly(proc, log_path)


@pytest.mark.parametrize("round_", range(REPEAT))
async def test_a_drain_while_the_workers_are_still_starting_refuses_new_connections_within_100_ms(tmp_path,
                                                                                                 round_):
    config = gateway_config(backend("sim-cli"))
    async with switchyard_serve(tmp_path, config, workers=2, ready=False) as (proc, url, log_path):
        port = int(url.rsplit(":", 1)[1])
        with trio.fail_after(10):   # the first worker listens well before either has loaded the app
            while await connect_outcome(port) != "accepted":
                await trio.sleep(0.005)
        await stop_and_probe(proc, port, log_path)
        await exits_cleanly(proc, log_path)
