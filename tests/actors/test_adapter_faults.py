"""An exception raised inside a backend's adapter (its transport, a simulator) is that backend's failure on
every path that dials it: a health check fails, a discovery round fails, a classification fails; the actor
never crashes, the traceback is logged (MockClock). The chat path's rule is tested in test_hostile_input.py.
"""

from __future__ import annotations

import logging

import httpx
import pytest
import trio

from switchyard.actors.llm_classifier import ClassifierFailed, classify_with_llm
from switchyard.actors.usage import UsageLedger
from switchyard.config.schema import BackendConfig, BackendType, Simulation, Snapshot
from switchyard.config.smart_routing import ClassifierSettings, LlmSettings
from switchyard.protocol.wires.upstream import Upstream
from tests.harness import gateway

CONFIG = """
health_checks: {interval: 1s, unhealthy_threshold: 1, warmup_check_interval: 1s}
discovery: {interval: 1s}
backends:
  - name: a
    type: simulated
    simulation: {latency: 10ms}
"""


def break_adapter(transport: httpx.AsyncBaseTransport) -> None:
    async def raises(request: httpx.Request) -> httpx.Response:
        raise TypeError("simulated adapter bug")
    transport.handle_async_request = raises   # type: ignore[method-assign]


def adapter_errors(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR and "inside its adapter" in r.getMessage()]


async def test_an_exception_inside_a_health_check_fails_the_check_not_the_health_actor(caplog, autojump_clock):
    async with gateway(CONFIG.replace("simulation:", "models: [demo]\n    simulation:")) as app:
        rt = app.runtime
        await trio.sleep(1.5)
        assert rt.health.view.backends["a"].state.value == "healthy"
        break_adapter(rt.upstream.simulated["a.simulated"])
        await trio.sleep(3)
        state = rt.health.view.backends["a"]
        assert state.state.value == "unhealthy" and "failed inside its adapter (TypeError" in state.last_error
        assert rt.supervisor.restarts["health"] == 0
    assert len(adapter_errors(caplog)) == 1   # once per backend and kind of exception, not every check


async def test_an_exception_inside_discovery_fails_the_round_not_the_discovery_actor(caplog, autojump_clock):
    async with gateway(CONFIG) as app:
        rt = app.runtime
        assert rt.discovery.view == {"a": frozenset()}   # the simulator lists no models: none configured
        break_adapter(rt.upstream.simulated["a.simulated"])
        await trio.sleep(2.5)
        assert rt.discovery.view == {"a": frozenset()}   # a failed round keeps what was known
        assert rt.supervisor.restarts["discovery"] == 0
    assert adapter_errors(caplog)


async def test_an_exception_inside_the_classifier_backends_adapter_is_an_upstream_error(caplog, autojump_clock):
    backend = BackendConfig(name="cls", type=BackendType.SIMULATED, url="http://cls.simulated", models=("tiny",),
                            simulation=Simulation(latency=0.25))
    upstream = Upstream(Snapshot(backends=(backend,)))
    break_adapter(upstream.simulated["cls.simulated"])
    ledger = UsageLedger()
    try:
        with pytest.raises(ClassifierFailed) as failed:
            await classify_with_llm(upstream, backend, ClassifierSettings(method="llm", llm=LlmSettings(model="tiny")),
                                    {"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
                                    request_id="r", key_id=None, ledger=ledger, now=trio.current_time)
    finally:
        await upstream.aclose()
    assert failed.value.reason == "upstream_error"
    assert "failed inside its adapter (TypeError)" in str(failed.value)
    assert [(r.outcome, r.status) for r in ledger.recent(10)] == [("upstream_error", None)]
    assert len(adapter_errors(caplog)) == 1
