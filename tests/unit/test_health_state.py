"""The backend health state machine, transition by transition."""

from switchyard.actors.routing.health import (
    BackendHealth,
    HealthState,
    Outcome,
    Thresholds,
    next_check_delay,
    observe,
)

T = Thresholds(unhealthy=3, healthy=2)
U, W, H, X = HealthState.UNKNOWN, HealthState.WARMING, HealthState.HEALTHY, HealthState.UNHEALTHY


def run(outcomes, start=None):
    h = start or BackendHealth()
    states = []
    for i, o in enumerate(outcomes):
        h = observe(h, o, float(i), T)
        states.append(h.state)
    return h, states


def test_unknown_becomes_healthy_on_first_success():
    _, states = run([Outcome.OK])
    assert states == [H]


def test_unhealthy_after_threshold_consecutive_failures():
    _, states = run([Outcome.OK, Outcome.FAIL, Outcome.FAIL, Outcome.FAIL])
    assert states == [H, H, H, X]


def test_success_resets_failure_count():
    _, states = run([Outcome.OK, Outcome.FAIL, Outcome.FAIL, Outcome.OK, Outcome.FAIL, Outcome.FAIL])
    assert X not in states


def test_recovery_needs_healthy_threshold_successes():
    h, _ = run([Outcome.FAIL] * 3)
    assert h.state is X
    h, states = run([Outcome.OK, Outcome.OK], start=h)
    assert states == [X, H]


def test_503_from_unknown_means_warming():
    _, states = run([Outcome.WARMING, Outcome.WARMING, Outcome.OK, Outcome.OK])
    assert states == [W, W, W, H]


def test_503_on_healthy_counts_as_failure_then_warming():
    _, states = run([Outcome.OK, Outcome.WARMING, Outcome.WARMING, Outcome.WARMING])
    assert states == [H, H, H, W]


def test_warming_that_keeps_failing_becomes_unhealthy():
    _, states = run([Outcome.WARMING, Outcome.FAIL, Outcome.FAIL])
    assert states == [W, W, X]


def test_routable_states():
    assert BackendHealth(state=U).routable and BackendHealth(state=H).routable
    assert not BackendHealth(state=W).routable and not BackendHealth(state=X).routable


def test_since_marks_last_state_change():
    h, _ = run([Outcome.OK, Outcome.OK, Outcome.FAIL, Outcome.FAIL, Outcome.FAIL])
    assert h.state is X and h.since == 4.0


def test_warmup_interval_while_unknown_or_warming():
    assert next_check_delay(BackendHealth(state=U), 30, 1) == 1
    assert next_check_delay(BackendHealth(state=W), 30, 1) == 1
    assert next_check_delay(BackendHealth(state=H), 30, 1) == 30
    assert next_check_delay(BackendHealth(state=X), 30, 1) == 30
