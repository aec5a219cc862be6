"""BackendHealthActor: transitions at exact virtual instants (autojump_clock)."""

import pytest
import trio
import trio.lowlevel

from switchyard.actors.health import BackendHealthActor
from switchyard.actors.routing.circuit import CircuitState
from switchyard.actors.routing.health import HealthState
from switchyard.config.load import load_text
from switchyard.protocol.wires.upstream import Upstream

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
health_checks:
  interval: 10s
  timeout: 2s
  unhealthy_threshold: 2
  healthy_threshold: 2
  warmup_check_interval: 1s
circuit_breaker: {min_callers: 1}   # the circuit tests report one anonymous caller's failures
backends:
  - {name: sim, type: simulated, models: [demo]}
"""


async def start(nursery, config=CONFIG, script=()):
    snapshot = load_text(config, env={}).snapshot
    upstream = Upstream(snapshot)
    sim = upstream.simulated["sim.simulated"]
    sim.health_script.extend(script)
    actor = BackendHealthActor(snapshot, upstream)
    await nursery.start(actor.run)
    return actor, sim


async def watch(actor, until):
    """(instant, state) of every state change up to ``until``, from the view's ``since``."""
    seen = []
    while trio.current_time() <= until:
        h = actor.view.backends["sim"]
        if h.state is not HealthState.UNKNOWN and (not seen or seen[-1] != (h.since, h.state.value)):
            seen.append((h.since, h.state.value))
        await trio.sleep(0.25)
    return seen


async def test_first_success_makes_unknown_healthy_at_once(autojump_clock, nursery):
    t0 = trio.current_time()
    actor, _ = await start(nursery)
    await trio.lowlevel.checkpoint()
    assert actor.view.backends["sim"].state is HealthState.HEALTHY
    assert actor.view.backends["sim"].since == t0


async def test_checks_every_interval_when_healthy(autojump_clock, nursery):
    t0 = trio.current_time()
    _, sim = await start(nursery)
    await trio.sleep(35)
    assert [t - t0 for t, k in sim.events if k.startswith("health")] == [0, 10, 20, 30]


async def test_unhealthy_after_threshold_failures_at_interval_instants(autojump_clock, nursery):
    t0 = trio.current_time()
    actor, sim = await start(nursery, script=[200, 500, 500, 200, 200])
    changes = await watch(actor, t0 + 45)
    # ok at 0, failures at 10 and 20 -> unhealthy at 20; ok at 30 and 40 -> healthy at 40
    assert [(t - t0, s) for t, s in changes] == [(0, "healthy"), (20, "unhealthy"), (40, "healthy")]


async def test_warming_backend_checked_at_warmup_interval(autojump_clock, nursery):
    t0 = trio.current_time()
    actor, sim = await start(nursery, script=[503, 503, 503, 200, 200])
    changes = await watch(actor, t0 + 6)
    assert [(t - t0, s) for t, s in changes] == [(0, "warming"), (4, "healthy")]
    await trio.sleep_until(t0 + 15)
    assert [t - t0 for t, k in sim.events if k.startswith("health")][:6] == [0, 1, 2, 3, 4, 14]


async def test_check_timeout_counts_as_failure(autojump_clock, nursery):
    t0 = trio.current_time()
    actor, sim = await start(nursery)
    await trio.sleep(1)

    async def hang(request):
        await trio.sleep_forever()
    sim.handle_async_request = hang
    changes = await watch(actor, t0 + 25)
    # checks at 10 and 20 each give up after the 2 s timeout: unhealthy at 22
    assert [(t - t0, s) for t, s in changes] == [(0, "healthy"), (22, "unhealthy")]
    assert actor.view.backends["sim"].last_error == "no answer within 2s"


async def test_failed_calls_open_the_circuit_of_that_model_at_once(autojump_clock, nursery):
    actor, _ = await start(nursery)
    await trio.sleep(1)
    actor.call_failed("sim", "demo", "HTTP 503")
    assert actor.view.admits("sim", "demo", trio.current_time())
    actor.call_failed("sim", "demo", "HTTP 503")  # unhealthy_threshold is 2
    assert actor.view.circuit("sim", "demo").state is CircuitState.OPEN
    assert not actor.view.admits("sim", "demo", trio.current_time())
    assert actor.view.admits("sim", "other-model", trio.current_time())
    assert actor.view.backends["sim"].state is HealthState.HEALTHY  # /health still says OK


async def test_half_open_probe_after_cooldown_closes_on_success(autojump_clock, nursery):
    actor, _ = await start(nursery)
    t0 = trio.current_time()
    actor.call_failed("sim", "demo", "reset")
    actor.call_failed("sim", "demo", "reset")
    assert not actor.view.admits("sim", "demo", t0 + 1.9)
    await trio.sleep(2)
    assert actor.view.admits("sim", "demo", trio.current_time())
    actor.dispatching("sim", "demo", trio.current_time())
    assert actor.view.circuit("sim", "demo").state is CircuitState.HALF_OPEN
    assert not actor.view.admits("sim", "demo", trio.current_time())  # one probe at a time
    actor.call_succeeded("sim", "demo")
    assert actor.view.circuit("sim", "demo").state is CircuitState.CLOSED
    assert actor.view.circuits == {}


async def test_failed_probe_reopens_with_doubled_cooldown(autojump_clock, nursery):
    actor, _ = await start(nursery)
    actor.call_failed("sim", "demo", "x")
    actor.call_failed("sim", "demo", "x")
    await trio.sleep(2)
    actor.dispatching("sim", "demo", trio.current_time())
    actor.call_failed("sim", "demo", "x")
    c = actor.view.circuit("sim", "demo")
    assert c.state is CircuitState.OPEN and c.cooldown == 4
    assert not actor.view.admits("sim", "demo", trio.current_time() + 3.9)
    assert actor.view.admits("sim", "demo", trio.current_time() + 4)


async def test_checks_disabled_means_always_routable(autojump_clock, nursery):
    actor, sim = await start(nursery, CONFIG.replace("interval: 10s", "enabled: false"))
    await trio.sleep(60)
    assert actor.view.routable("sim")
    assert sim.events == []


async def test_view_replaced_not_mutated(autojump_clock, nursery):
    actor, sim = await start(nursery, script=[200, 500, 500])
    await trio.sleep(1)
    before = actor.view
    await trio.sleep(25)
    assert before.backends["sim"].state is HealthState.HEALTHY
    assert actor.view is not before
