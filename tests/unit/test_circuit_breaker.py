"""One test per rule of ``circuit_breaker``: its config, the circuits it drives, and a live reload.

The circuits themselves are pure (``actors/routing/circuit.py``); the actor
tests drive a BackendHealthActor that is not running (no check loops), so
only the passive reports and ``reconfigure`` are at work.
"""

import logging

import pytest
import trio

from switchyard.actors.health import BackendHealthActor
from switchyard.actors.routing.circuit import (
    ANONYMOUS,
    CLEAN,
    EVERY_CALLER,
    Circuit,
    CircuitState,
    Policy,
    Window,
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

def test_defaults():
    cb = snapshot().circuit_breaker
    assert cb == CircuitBreaker()
    assert (cb.enabled, cb.failure_threshold, cb.window, cb.failure_rate, cb.minimum_calls, cb.min_callers,
            cb.timeout, cb.max_timeout, cb.half_open_max_requests, cb.half_open_success_threshold) == \
        (True, None, 30.0, 0.5, None, 2, 2.0, 16.0, 1, 1)


def test_every_key_is_read():
    cb = snapshot(MINIMAL + """
circuit_breaker:
  enabled: false
  failure_threshold: 5
  window: 1m
  failure_rate: 0.8
  minimum_calls: 10
  min_callers: 3
  timeout: 500ms
  max_timeout: 30s
  half_open_max_requests: 3
  half_open_success_threshold: 2
""").circuit_breaker
    assert cb == CircuitBreaker(False, 5, 60.0, 0.8, 10, 3, 0.5, 30.0, 3, 2)


def test_each_field_is_validated_with_its_dotted_path():
    assert errors_of(MINIMAL + """
circuit_breaker:
  enabled: 1
  failure_threshold: 0
  window: soon
  failure_rate: 0
  minimum_calls: 0
  min_callers: 0
  timeout: 0s
  half_open_max_requests: -1
  half_open_success_threshold: 1.5
""") == [
        "circuit_breaker.enabled: must be true or false, got integer",
        "circuit_breaker.failure_threshold: must be at least 1, got 0",
        "circuit_breaker.window: must be a duration like 10s, 500ms or 1m30s, got 'soon'",
        "circuit_breaker.failure_rate: must be greater than 0 and at most 1, got 0",
        "circuit_breaker.minimum_calls: must be at least 1, got 0",
        "circuit_breaker.min_callers: must be at least 1, got 0",
        "circuit_breaker.timeout: must be greater than zero",
        "circuit_breaker.half_open_max_requests: must be at least 1, got -1",
        "circuit_breaker.half_open_success_threshold: must be an integer, got number",
    ]


@pytest.mark.parametrize("value, error", [
    ("1.5", "must be greater than 0 and at most 1, got 1.5"),
    ("-0.5", "must be greater than 0 and at most 1, got -0.5"),
    ("half", "must be a number, got string"),
    ("true", "must be a number, got boolean"),
])
def test_failure_rate_is_a_share_above_zero_and_at_most_one(value, error):
    assert errors_of(MINIMAL + f"circuit_breaker: {{failure_rate: {value}}}\n") == [
        f"circuit_breaker.failure_rate: {error}"]


def test_min_callers_and_minimum_calls_have_upper_bounds():
    assert errors_of(MINIMAL + "circuit_breaker: {min_callers: 101, minimum_calls: 100001}\n") == [
        "circuit_breaker.minimum_calls: must be at most 100000, got 100001",
        "circuit_breaker.min_callers: must be at most 100, got 101"]


def test_minimum_calls_below_failure_threshold_is_a_warning():
    loaded = load_text(MINIMAL + "circuit_breaker: {failure_threshold: 5, minimum_calls: 3}\n", env={})
    assert loaded.warnings == ("circuit_breaker.minimum_calls: is below failure_threshold (5): the 5 failures "
                               "that open a circuit are that many calls already",)
    assert load_text(MINIMAL + "circuit_breaker: {failure_threshold: 5, minimum_calls: 5}\n",
                     env={}).warnings == ()


def test_a_null_window_is_the_default_one():
    assert snapshot(MINIMAL + "circuit_breaker: {window: null}\n").circuit_breaker.window == 30.0


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


def test_minimum_calls_unset_follows_the_failure_threshold():
    actor = BackendHealthActor(snapshot(MINIMAL + "health_checks: {unhealthy_threshold: 7}\n"), None)
    assert actor.policy.minimum_calls == 7
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 4}\n"), None)
    assert actor.policy.minimum_calls == 4
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 4, minimum_calls: 9}\n"),
                               None)
    assert actor.policy.minimum_calls == 9


# --- the circuits (pure) -----------------------------------------------------------

ANY = dict(min_callers=1)   # the mechanics below: one caller's failures open a circuit
NEW = (CLEAN, None)         # a route with no window open: (its circuit, its window)
Route = tuple[Circuit, Window | None]


def fail(route: Route, times: int, now: float, policy: Policy, caller: str = ANONYMOUS) -> Route:
    for _ in range(times):
        route = on_failure(*route, now, policy, caller)
    return route


def succeed(route: Route, times: int, now: float, policy: Policy) -> Route:
    for _ in range(times):
        route = on_success(*route, now, policy)
    return route


def opened(policy: Policy) -> Circuit:
    """A circuit the first failure of a one-failure policy opened at 0."""
    return on_failure(CLEAN, None, 0.0, policy)[0]


def test_failure_threshold_failures_in_the_window_open_the_circuit():
    policy = Policy(failure_threshold=4, **ANY)
    assert fail(NEW, 3, 0.0, policy)[0].state is CLOSED
    c, w = fail(NEW, 4, 0.0, policy)
    assert c.state is OPEN and c.cooldown == 2.0 and w is None


def test_failure_rate_a_window_whose_calls_mostly_succeed_stays_closed():
    policy = Policy(failure_threshold=3, failure_rate=0.5, **ANY)
    route = NEW
    for t in range(3):   # failure, success, success: three times
        route = succeed(on_failure(*route, float(t), policy), 2, float(t), policy)
    c, w = on_failure(*route, 3.0, policy)
    assert (c.state, c.failures, w.calls) == (CLOSED, 4, 10)    # 40 % failed
    c, w = fail((c, w), 2, 3.0, policy)
    assert (c.state, c.failures) == (OPEN, 6)                   # 6 of 12, 50 %: the rate is reached


def test_failure_rate_a_success_no_longer_starts_the_count_over():
    policy = Policy(failure_threshold=3, **ANY)
    c, _ = on_failure(*succeed(fail(NEW, 2, 0.0, policy), 1, 0.0, policy), 0.0, policy)
    assert (c.state, c.failures) == (OPEN, 3)                   # 3 of 4 calls


def test_minimum_calls_no_judgement_before_the_window_has_that_many_calls():
    policy = Policy(failure_threshold=2, minimum_calls=5, **ANY)
    c, w = fail(NEW, 4, 0.0, policy)
    assert (c.state, w.calls) == (CLOSED, 4)
    assert on_failure(c, w, 0.0, policy)[0].state is OPEN
    c, _ = on_failure(*succeed(fail(NEW, 2, 0.0, policy), 2, 0.0, policy), 0.0, policy)
    assert (c.state, c.failures) == (OPEN, 3)                   # 5 calls: successes are calls too


def test_min_callers_one_callers_failures_never_open_the_circuit():
    policy = Policy(failure_threshold=3, min_callers=2)
    c, w = fail(NEW, 50, 0.0, policy, "key a")
    assert (c.state, c.failures, w.calls, w.tally) == (CLOSED, 50, 50, (("key a", 50),))


def test_min_callers_a_stray_failure_of_a_second_caller_opens_nothing():
    policy = Policy(failure_threshold=3, min_callers=2)
    c, w = on_failure(*fail(NEW, 50, 0.0, policy, "key a"), 0.0, policy, "key b")
    assert (c.state, c.failures) == (CLOSED, 51)                # without key a: one failure
    c, w = fail((c, w), 2, 0.0, policy, "key b")
    assert (c.state, c.suspects) == (OPEN, {"key a"})          # without key a: 3 failures of 3 calls


def test_min_callers_the_worst_callers_are_left_out_of_the_failures_and_of_the_calls():
    policy = Policy(failure_threshold=3, min_callers=2)
    route = fail(NEW, 30, 0.0, policy, "key a")
    c, w = fail(succeed(route, 4, 0.0, policy), 3, 0.0, policy, "key b")
    assert (c.state, w.calls) == (CLOSED, 37)                   # without key a: 3 failures of 7 calls
    c, w = fail(succeed(route, 3, 0.0, policy), 3, 0.0, policy, "key b")
    assert (c.state, c.suspects) == (OPEN, {"key a"})          # 3 of 6: the rate is reached


def test_min_callers_three_leaves_out_the_two_worst():
    policy = Policy(failure_threshold=3, min_callers=3)
    route = on_failure(*fail(fail(NEW, 5, 0.0, policy, "ip 10.0.0.1"), 6, 0.0, policy, "ip 10.0.0.2"), 0.0,
                       policy, "ip 10.0.0.3")
    assert route[0].state is CLOSED
    c, _ = fail(route, 2, 0.0, policy, "ip 10.0.0.3")
    assert (c.state, c.suspects) == (OPEN, {"ip 10.0.0.1", "ip 10.0.0.2"})
    c, _ = fail(NEW, 3, 0.0, Policy(failure_threshold=3, min_callers=1), "ip 10.0.0.1")
    assert (c.state, c.suspects) == (OPEN, frozenset())         # 1: nobody is left out


def test_a_window_counts_the_failures_of_at_most_16_callers_one_by_one():
    policy = Policy(failure_threshold=1000, min_callers=2)
    route = NEW
    for i in range(16):
        route = on_failure(*route, 0.0, policy, f"key {i}")
    c, w = fail(route, 10, 0.0, policy, "key a")   # the first caller with the fewest failures makes room
    assert (w.tally[-1], len(w.tally), w.others, c.failures) == (("key a", 10), 16, 1, 26)
    assert "key 0" not in dict(w.tally)
    c, w = fail((c, w), 2, 0.0, policy, EVERY_CALLER)
    assert (len(w.tally), w.others) == (16, 3)


def test_a_connection_that_could_not_be_opened_counts_as_every_callers():
    policy = Policy(failure_threshold=3, min_callers=2)
    c, _ = fail(NEW, 3, 0.0, policy, EVERY_CALLER)
    assert (c.state, c.suspects) == (OPEN, frozenset())
    route = on_failure(*fail(NEW, 2, 0.0, policy, "key a"), 0.0, policy, EVERY_CALLER)
    assert route[0].state is CLOSED                             # key a's two are left out, never every caller's
    c, _ = fail(route, 2, 0.0, policy, EVERY_CALLER)
    assert (c.state, c.suspects) == (OPEN, {"key a"})
    assert fail(NEW, 2, 0.0, policy, EVERY_CALLER)[0].state is CLOSED   # the threshold still holds


def test_window_failures_past_it_start_a_new_window():
    policy = Policy(failure_threshold=2, window=10.0, **ANY)
    c, w = on_failure(*on_failure(CLEAN, None, 0.0, policy), 10.5, policy)   # the first is out of the window
    assert (c.state, c.failures, w.calls, w.began) == (CLOSED, 1, 1, 10.5)
    assert on_failure(c, w, 20.0, policy)[0].state is OPEN   # within 10 s of the window's first failure


def test_window_counts_until_it_expires_then_a_success_forgets_it():
    policy = Policy(failure_threshold=3, window=10.0, **ANY)
    c, w = on_success(*on_failure(CLEAN, None, 0.0, policy), 10.0, policy)   # at the window's last instant
    assert (c.failures, w.calls) == (1, 2)
    c, w = on_success(c, w, 10.5, policy)
    assert c is CLEAN and w is None


def test_window_default_is_finite_failures_far_apart_never_add_up():
    route = fail(NEW, 2, 0.0, Policy(**ANY))
    assert on_failure(*route, 1e6, Policy(**ANY))[0].state is CLOSED


def test_a_success_on_a_clean_route_is_the_clean_circuit_itself():
    c, w = on_success(CLEAN, None, 5.0, Policy())
    assert c is CLEAN and w is None


def test_a_success_inside_a_window_counts_in_the_window_alone():
    c, w = on_failure(CLEAN, None, 0.0, Policy(), "key a")
    after, counted = on_success(c, w, 1.0, Policy())
    assert after is c and (counted.calls, counted.tally) == (2, (("key a", 1),))


def test_timeout_is_the_first_cooldown_and_max_timeout_caps_the_doubling():
    policy = Policy(failure_threshold=1, timeout=3.0, max_timeout=10.0, **ANY)
    c = opened(policy)
    assert c.cooldown == 3.0 and not c.admits(2.9) and c.admits(3.0)
    cooldowns = []
    for _ in range(3):
        c, _ = on_failure(on_probe(c), None, 0.0, policy)
        cooldowns.append(c.cooldown)
    assert cooldowns == [6.0, 10.0, 10.0]


def test_a_failed_probe_of_a_caller_that_is_no_suspect_reopens():
    c = opened(Policy(failure_threshold=1, **ANY))
    c, _ = on_failure(on_probe(c), None, 2.0, Policy(min_callers=2), "key a")
    assert c.state is OPEN and c.cooldown == 4.0


def test_a_failed_probe_of_a_suspect_proves_nothing_the_next_call_probes():
    policy = Policy(failure_threshold=3, min_callers=2)
    c, _ = fail(fail(NEW, 10, 0.0, policy, "key a"), 3, 1.0, policy, "key b")
    assert (c.state, c.opened_at, c.suspects) == (OPEN, 1.0, {"key a"})
    c, _ = on_failure(on_probe(c), None, 3.0, policy, "key a")
    assert (c.state, c.cooldown, c.opened_at) == (OPEN, 2.0, 1.0) and c.admits(3.0)   # no doubling
    c, _ = on_failure(on_probe(c), None, 3.5, policy, "key b")
    assert (c.state, c.cooldown, c.suspects) == (OPEN, 4.0, {"key a"})   # anyone else's reopens it


def test_half_open_max_requests_probes_go_at_once():
    c = on_probe(opened(Policy(failure_threshold=1, half_open_max_requests=2, **ANY)))
    assert c.state is HALF_OPEN and c.admits(5.0, max_probes=2)
    c = on_probe(c)
    assert c.probes == 2 and not c.admits(5.0, max_probes=2)


def test_half_open_success_threshold_successes_close_the_circuit():
    policy = Policy(failure_threshold=1, half_open_max_requests=2, half_open_success_threshold=2, **ANY)
    c, w = on_success(on_probe(on_probe(opened(policy))), None, 2.0, policy)
    assert c.state is HALF_OPEN and c.successes == 1 and c.probes == 1
    assert on_success(c, w, 2.0, policy) == (Circuit(), None)


def test_a_failed_probe_reopens_whatever_succeeded_before():
    policy = Policy(failure_threshold=1, half_open_max_requests=2, half_open_success_threshold=2, **ANY)
    c, _ = on_success(on_probe(on_probe(opened(policy))), None, 2.0, policy)
    c, _ = on_failure(c, None, 1.0, policy)
    assert c.state is OPEN and c.cooldown == 4.0 and c.successes == 0


def test_an_abandoned_last_probe_with_nothing_proven_reopens():
    after = on_probe_abandoned(on_probe(opened(Policy(failure_threshold=1, **ANY))))
    assert after.state is OPEN and after.admits(2.0)


# --- the actor: what it publishes and logs, enabled, and live on reload -------------------

async def test_a_success_inside_a_window_replaces_no_view(autojump_clock):
    actor = BackendHealthActor(snapshot(), None)
    actor.call_failed("sim", "demo", "HTTP 500", "key a")
    view = actor.view
    for _ in range(5):
        actor.call_succeeded("sim", "demo")
    assert actor.view is view and actor.view.circuit("sim", "demo").failures == 1
    assert actor.window("sim", "demo").calls == 6                # counted all the same
    await trio.sleep(31)
    actor.call_succeeded("sim", "demo")                          # past the window: forgotten, and published
    assert actor.view.circuits == {} and actor.window("sim", "demo") is None


async def test_a_suspects_failed_probes_are_logged_at_debug_and_the_next_call_probes(autojump_clock, caplog):
    actor = BackendHealthActor(snapshot(), None)   # failure_threshold 3, min_callers 2
    for caller in ["key a"] * 6 + ["key b"] * 3:
        actor.call_failed("sim", "demo", "HTTP 500", caller)
    assert actor.view.circuit("sim", "demo").suspects == {"key a"}
    await trio.sleep(2)
    caplog.set_level(logging.DEBUG, logger="switchyard.health")
    caplog.clear()
    for _ in range(3):                                           # key a wins the probe, and fails, again and again
        assert actor.dispatching("sim", "demo", trio.current_time())
        actor.call_failed("sim", "demo", "HTTP 500", "key a")
    assert (actor.view.circuit("sim", "demo").state, actor.view.circuit("sim", "demo").cooldown) == (OPEN, 2.0)
    assert actor.dispatching("sim", "demo", trio.current_time())   # key b's call probes
    actor.call_succeeded("sim", "demo")
    assert actor.view.circuits == {}
    # the first probe going out and the close are news; key a's failed probes and the probes after them are not
    assert [r.levelname for r in caplog.records] == ["INFO"] + ["DEBUG"] * 6 + ["INFO"]




async def test_disabled_real_failures_never_open_a_circuit():
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {enabled: false}\n"), None)
    for _ in range(10):
        actor.call_failed("sim", "demo", "HTTP 503")
    assert actor.view.circuits == {}
    assert actor.view.admits("sim", "demo", trio.current_time())


async def test_reload_changes_the_threshold_for_the_next_failures_and_keeps_the_circuits():
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 5, min_callers: 1}\n"), None)
    actor.call_failed("sim", "demo", "HTTP 503")
    actor.call_failed("sim", "demo", "HTTP 503")
    before = actor.view.circuit("sim", "demo")
    actor.reconfigure(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 3, timeout: 7s, min_callers: 1}\n"))
    assert actor.view.circuit("sim", "demo") == before        # two failures still counted
    actor.call_failed("sim", "demo", "HTTP 503")               # the third: the new threshold
    c = actor.view.circuit("sim", "demo")
    assert c.state is OPEN and c.failures == 3 and c.cooldown == 7.0


async def test_reload_changes_the_probe_count_of_a_circuit_already_open(autojump_clock):
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 1, min_callers: 1}\n"), None)
    actor.call_failed("sim", "demo", "HTTP 503")
    await trio.sleep(2)
    assert actor.dispatching("sim", "demo", trio.current_time())
    assert not actor.view.admits("sim", "demo", trio.current_time())   # one probe at a time
    actor.reconfigure(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 1, min_callers: 1, "
                                         "half_open_max_requests: 2}\n"))
    assert actor.view.circuit("sim", "demo").state is HALF_OPEN     # the probe in flight is kept
    assert actor.view.admits("sim", "demo", trio.current_time())
    assert actor.dispatching("sim", "demo", trio.current_time())
    assert not actor.view.admits("sim", "demo", trio.current_time())


async def test_reload_turning_circuits_off_forgets_them():
    actor = BackendHealthActor(snapshot(MINIMAL + "circuit_breaker: {failure_threshold: 1, min_callers: 1}\n"), None)
    actor.call_failed("sim", "demo", "HTTP 503")
    assert actor.view.circuit("sim", "demo").state is OPEN
    actor.reconfigure(snapshot(MINIMAL + "circuit_breaker: {enabled: false}\n"))
    assert actor.view.circuits == {}
    assert actor.view.admits("sim", "demo", trio.current_time())
