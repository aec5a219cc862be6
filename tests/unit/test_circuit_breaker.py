"""One test per rule of ``circuit_breaker``: its config, the circuits it drives, and a live reload.

The circuits themselves are pure (``actors/routing/circuit.py``); the reload
tests drive a BackendHealthActor that is not running (no check loops), so
only the passive reports and ``reconfigure`` are at work.
"""

import pytest
import trio

from switchyard.actors.health import BackendHealthActor
from switchyard.actors.routing.circuit import (
    Circuit,
    CircuitState,
    Policy,
    on_failure,
    on_probe,
    on_probe_abandoned,
    on_success,
)
from switchyard.config.load import ConfigError, load_text
from switchyard.config.resilience import CircuitBreaker

MINIMAL = """
backends:
  - {name: sim, type: simulated, models: [demo]}
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(text, env={})
    return info.value.errors


def snapshot(text: str = MINIMAL):
    return load_text(text, env={}).snapshot


OPEN = CircuitState.OPEN
HALF_OPEN = CircuitState.HALF_OPEN
CLOSED = CircuitState.CLOSED


# --- the config ----------------------------------------------------------------

def test_defaults_are_the_numbers_the_circuits_always_had():
    cb = snapshot().circuit_breaker
    assert cb == CircuitBreaker()
    assert (cb.enabled, cb.failure_threshold, cb.window, cb.timeout, cb.max_timeout,
            cb.half_open_max_requests, cb.half_open_success_threshold) == (True, None, None, 2.0, 16.0, 1, 1)


def test_every_key_is_read():
    cb = snapshot(MINIMAL + """
circuit_breaker:
  enabled: false
  failure_threshold: 5
  window: 1m
  timeout: 500ms
  max_timeout: 30s
  half_open_max_requests: 3
  half_open_success_threshold: 2
""").circuit_breaker
    assert cb == CircuitBreaker(False, 5, 60.0, 0.5, 30.0, 3, 2)


def test_each_field_is_validated_with_its_dotted_path():
    assert errors_of(MINIMAL + """
circuit_breaker:
  enabled: 1
  failure_threshold: 0
  window: soon
  timeout: 0s
  half_open_max_requests: -1
  half_open_success_threshold: 1.5
""") == [
        "circuit_breaker.enabled: must be true or false, got integer",
        "circuit_breaker.failure_threshold: must be at least 1, got 0",
        "circuit_breaker.window: must be a duration like 10s, 500ms or 1m30s, got 'soon'",
        "circuit_breaker.timeout: must be greater than zero",
        "circuit_breaker.half_open_max_requests: must be at least 1, got -1",
        "circuit_breaker.half_open_success_threshold: must be an integer, got number",
    ]


def test_max_timeout_below_timeout_is_refused():
    assert errors_of(MINIMAL + "circuit_breaker: {timeout: 10s, max_timeout: 5s}\n") == [
        "circuit_breaker.max_timeout: must be at least timeout (10s), got 5s"]


def test_an_unknown_key_under_circuit_breaker_is_still_unknown():
    assert errors_of(MINIMAL + "circuit_breaker: {treshold: 3}\n") == ["circuit_breaker.treshold: unknown key"]


def test_failure_threshold_unset_follows_health_checks_unhealthy_threshold():
    actor = BackendHealthActor(snapshot(MINIMAL + "health_checks: {unhealthy_threshold: 7}\n"), None)
    assert actor.policy.failure_threshold == 7
    actor = BackendHealthActor(snapshot(MINIMAL + "health_checks: {unhealthy_threshold: 7}\n"
                                        "circuit_breaker: {failure_threshold: 2}\n"), None)
    assert actor.policy.failure_threshold == 2


# --- the circuits (pure) -----------------------------------------------------------

def fail(c: Circuit, times: int, now: float, policy: Policy) -> Circuit:
    for _ in range(times):
        c = on_failure(c, now, policy)
    return c


def test_failure_threshold_consecutive_failures_open_the_circuit():
    policy = Policy(failure_threshold=4)
    assert fail(Circuit(), 3, 0.0, policy).state is CLOSED
    c = fail(Circuit(), 4, 0.0, policy)
    assert c.state is OPEN and c.cooldown == 2.0


def test_failures_further_apart_than_the_window_start_a_new_run():
    policy = Policy(failure_threshold=2, window=10.0)
    c = on_failure(Circuit(), 0.0, policy)
    c = on_failure(c, 10.5, policy)           # the first is out of the window
    assert c.state is CLOSED and c.failures == 1
    assert on_failure(c, 20.0, policy).state is OPEN   # within 10 s of the run's first failure


def test_without_a_window_failures_count_however_far_apart():
    c = fail(Circuit(), 2, 0.0, Policy(failure_threshold=3))
    assert on_failure(c, 1e6, Policy(failure_threshold=3)).state is OPEN


def test_timeout_is_the_first_cooldown_and_max_timeout_caps_the_doubling():
    policy = Policy(failure_threshold=1, timeout=3.0, max_timeout=10.0)
    c = on_failure(Circuit(), 0.0, policy)
    assert c.cooldown == 3.0 and not c.admits(2.9) and c.admits(3.0)
    cooldowns = []
    for _ in range(3):
        c = on_failure(on_probe(c), 0.0, policy)
        cooldowns.append(c.cooldown)
    assert cooldowns == [6.0, 10.0, 10.0]


def test_half_open_max_requests_probes_go_at_once():
    policy = Policy(failure_threshold=1, half_open_max_requests=2)
    c = on_probe(on_failure(Circuit(), 0.0, policy))
    assert c.state is HALF_OPEN and c.admits(5.0, max_probes=2)
    c = on_probe(c)
    assert c.probes == 2 and not c.admits(5.0, max_probes=2)


def test_half_open_success_threshold_successes_close_the_circuit():
    policy = Policy(failure_threshold=1, half_open_max_requests=2, half_open_success_threshold=2)
    c = on_probe(on_probe(on_failure(Circuit(), 0.0, policy)))
    c = on_success(c, policy)
    assert c.state is HALF_OPEN and c.successes == 1 and c.probes == 1
    assert on_success(c, policy) == Circuit()


def test_a_failed_probe_reopens_whatever_succeeded_before():
    policy = Policy(failure_threshold=1, half_open_max_requests=2, half_open_success_threshold=2)
    c = on_success(on_probe(on_probe(on_failure(Circuit(), 0.0, policy))), policy)
    c = on_failure(c, 1.0, policy)
    assert c.state is OPEN and c.cooldown == 4.0 and c.successes == 0


def test_an_abandoned_last_probe_with_nothing_proven_reopens():
    c = on_probe(on_failure(Circuit(), 0.0, Policy(failure_threshold=1)))
    after = on_probe_abandoned(c)
    assert after.state is OPEN and after.admits(2.0)


# --- the actor: enabled, and live on reload ---------------------------------------------

async def test_disabled_real_failures_never_open_a_circuit():
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {enabled: false}\n"), None)
    for _ in range(10):
        actor.call_failed("sim", "demo", "HTTP 503")
    assert actor.view.circuits == {}
    assert actor.view.admits("sim", "demo", trio.current_time())


async def test_reload_changes_the_threshold_for_the_next_failures_and_keeps_the_circuits():
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 5}\n"), None)
    actor.call_failed("sim", "demo", "HTTP 503")
    actor.call_failed("sim", "demo", "HTTP 503")
    before = actor.view.circuit("sim", "demo")
    actor.reconfigure(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 3, timeout: 7s}\n"))
    assert actor.view.circuit("sim", "demo") == before        # two failures still counted
    actor.call_failed("sim", "demo", "HTTP 503")               # the third: the new threshold
    c = actor.view.circuit("sim", "demo")
    assert c.state is OPEN and c.failures == 3 and c.cooldown == 7.0


async def test_reload_changes_the_probe_count_of_a_circuit_already_open(autojump_clock):
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 1}\n"), None)
    actor.call_failed("sim", "demo", "HTTP 503")
    await trio.sleep(2)
    assert actor.dispatching("sim", "demo", trio.current_time())
    assert not actor.view.admits("sim", "demo", trio.current_time())   # one probe at a time
    actor.reconfigure(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 1, half_open_max_requests: 2}\n"))
    assert actor.view.circuit("sim", "demo").state is HALF_OPEN     # the probe in flight is kept
    assert actor.view.admits("sim", "demo", trio.current_time())
    assert actor.dispatching("sim", "demo", trio.current_time())
    assert not actor.view.admits("sim", "demo", trio.current_time())


async def test_reload_turning_circuits_off_forgets_them():
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 1}\n"), None)
    actor.call_failed("sim", "demo", "HTTP 503")
    assert actor.view.circuit("sim", "demo").state is OPEN
    actor.reconfigure(snapshot(MINIMAL + "circuit_breaker: {enabled: false}\n"))
    assert actor.view.circuits == {}
    assert actor.view.admits("sim", "demo", trio.current_time())
