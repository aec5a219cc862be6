"""The limiter's pure core at exact instants: one test per rule of docs/limits.md (GCRA, leases, budgets)."""

import datetime as dt

import pytest

from switchyard.actors.routing import limits as core
from switchyard.actors.routing.limits import BudgetLine, Counters, Demand, Scope, decide, settle
from switchyard.config.access import ApiKey
from switchyard.config.limits import Budget, Organization, Period, RateLimit, RateLimiting

WALL = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.timezone.utc).timestamp()   # a Tuesday


def utc(*args: int) -> float:
    return dt.datetime(*args, tzinfo=dt.timezone.utc).timestamp()


def key_scope(**dims: int) -> Scope:
    return Scope("key", "team-a", RateLimit(**dims))


_calls = iter(range(1_000_000))


def demand(*scopes: Scope, tokens: int = 0, budgets: tuple[BudgetLine, ...] = (), call_id: str | None = None):
    return Demand(call_id or f"call-{next(_calls)}", tuple(scopes), tokens, budgets)


def admit(c: Counters, d: Demand, now: float, wall: float = WALL):
    return decide(c, d, now, wall)


def budget_line(limit_usd=None, limit_tokens=None, period=Period.MONTH, worst_usd=0.0, tokens=0, owner="key",
                owner_id="team-a") -> BudgetLine:
    return BudgetLine(owner, owner_id, Budget(limit_usd, limit_tokens, period), worst_usd, tokens)


# --- requests: GCRA ---------------------------------------------------------------------------

def test_gcra_admits_a_burst_of_the_limit_then_one_per_emission_interval():
    c, scope = Counters(), key_scope(requests_per_minute=60)       # e = 1s
    assert all(admit(c, demand(scope), 100.0).refusal is None for _ in range(60))
    assert admit(c, demand(scope), 100.0).refusal is not None
    assert admit(c, demand(scope), 100.999).refusal is not None
    assert admit(c, demand(scope), 101.0).refusal is None
    assert admit(c, demand(scope), 101.5).refusal is not None
    assert admit(c, demand(scope), 102.0).refusal is None


def test_gcra_requests_per_second_bursts_its_limit_within_one_second():
    c, scope = Counters(), key_scope(requests_per_second=5)         # e = 0.2s
    assert [admit(c, demand(scope), 0.0).refusal is None for _ in range(6)] == [True] * 5 + [False]
    assert admit(c, demand(scope), 0.2).refusal is None
    assert admit(c, demand(scope), 0.2).refusal is not None


def test_gcra_retry_after_is_the_exact_wait_until_the_next_admission():
    c, scope = Counters(), key_scope(requests_per_minute=100)       # e = 0.6s
    for _ in range(100):
        assert admit(c, demand(scope), 0.0).refusal is None
    refusal = admit(c, demand(scope), 0.0).refusal
    assert (refusal.scope, refusal.name, refusal.dimension, refusal.limit) == \
        ("key", "team-a", "requests_per_minute", 100)
    assert refusal.retry_after == pytest.approx(0.6, abs=1e-6)
    assert admit(c, demand(scope), 0.25).refusal.retry_after == pytest.approx(0.35, abs=1e-6)
    assert admit(c, demand(scope), 0.6).refusal is None


def test_gcra_state_starts_empty_so_an_idle_window_is_full():
    c, scope = Counters(), key_scope(requests_per_minute=2)
    assert admit(c, demand(scope), 5_000.0).refusal is None
    assert admit(c, demand(scope), 5_000.0).refusal is None
    assert admit(c, demand(scope), 5_000.0).refusal is not None
    assert admit(c, demand(scope), 5_060.0).refusal is None     # 60s later: full again


def test_remaining_and_reset_are_read_after_the_decision():
    c, scope = Counters(), key_scope(requests_per_minute=10)        # e = 6s
    for _ in range(2):
        admit(c, demand(scope), 0.0)
    decision = admit(c, demand(scope), 0.0)
    assert decision.requests == core.Quota(limit=10, remaining=7, reset=18.0)
    assert decision.tokens is None
    later = admit(c, demand(scope), 3.0)                           # TAT 18 -> 24, 3s on: 21s ahead
    assert later.requests == core.Quota(limit=10, remaining=6, reset=21.0)


# --- tokens: GCRA with cost -------------------------------------------------------------------

def test_tokens_per_minute_reserves_the_call_s_tokens_at_admission():
    c, scope = Counters(), key_scope(tokens_per_minute=1000)         # e = 0.06s a token
    assert admit(c, demand(scope, tokens=400), 0.0).refusal is None
    second = admit(c, demand(scope, tokens=400), 0.0)
    assert second.refusal is None and second.tokens == core.Quota(limit=1000, remaining=200, reset=48.0)
    third = admit(c, demand(scope, tokens=400), 0.0).refusal
    assert third.dimension == "tokens_per_minute"
    assert third.retry_after == pytest.approx(12.0, abs=1e-6)      # 48 + 24 - 60
    assert admit(c, demand(scope, tokens=200), 0.0).refusal is None   # exactly the rest fits


def test_settle_gives_back_the_unused_part_of_the_reservation():
    c, scope = Counters(), key_scope(tokens_per_minute=1000)
    first = demand(scope, tokens=400)
    admit(c, first, 0.0)
    admit(c, demand(scope, tokens=400), 0.0)
    assert admit(c, demand(scope, tokens=400), 0.0).refusal is not None
    settle(c, first, (), tokens_used=100, cost_usd=None, now=0.0)   # TAT 48 - 300 * 0.06 = 30
    assert c.tat[("key", "team-a", "tokens_per_minute")] == pytest.approx(30.0)
    assert admit(c, demand(scope, tokens=400), 0.0).refusal is None


def test_settle_charges_tokens_used_beyond_the_reservation():
    c, scope = Counters(), key_scope(tokens_per_minute=1000)
    d = demand(scope, tokens=100)
    admit(c, d, 0.0)                                                # TAT 6
    settle(c, d, (), tokens_used=300, cost_usd=None, now=1.0)       # TAT 6 + 200 * 0.06 = 18
    assert c.tat[("key", "team-a", "tokens_per_minute")] == pytest.approx(18.0)


def test_settle_never_moves_the_token_window_before_the_settle_time():
    c, scope = Counters(), key_scope(tokens_per_minute=1000)
    d = demand(scope, tokens=400)
    admit(c, d, 0.0)                                                # TAT 24
    settle(c, d, (), tokens_used=0, cost_usd=None, now=20.0)        # 24 - 24 = 0, floored at 20
    assert c.tat[("key", "team-a", "tokens_per_minute")] == 20.0


def test_a_reservation_larger_than_the_limit_is_refused_outright_and_says_so():
    c, scope = Counters(), key_scope(tokens_per_minute=1000)
    refusal = admit(c, demand(scope, tokens=1001), 0.0).refusal
    assert (refusal.dimension, refusal.limit, refusal.retry_after) == ("tokens_per_minute", 1000, None)
    assert "reserves 1001 tokens, more than the whole limit of 1000 tokens per minute" in refusal.message
    assert c.tat == {}
    assert admit(c, demand(scope, tokens=1000), 0.0).refusal is None   # the whole limit itself fits


def test_settle_gives_back_by_the_limit_the_call_was_admitted_under():
    c = Counters()
    d = demand(key_scope(tokens_per_minute=1000), tokens=500)
    admit(c, d, 0.0)                                                # TAT 30
    settle(c, d, (), tokens_used=0, cost_usd=None, now=0.0)         # even if the limit changed since
    assert c.tat[("key", "team-a", "tokens_per_minute")] == 0.0


# --- max_concurrent: leases -------------------------------------------------------------------

def test_max_concurrent_admits_while_live_leases_are_below_the_limit():
    c, scope = Counters(), key_scope(max_concurrent=2)
    first = demand(scope)
    assert admit(c, first, 0.0).refusal is None
    assert admit(c, demand(scope), 0.0).refusal is None
    refusal = admit(c, demand(scope), 0.0).refusal
    assert (refusal.dimension, refusal.limit, refusal.retry_after) == ("max_concurrent", 2, None)
    settle(c, first, (), tokens_used=0, cost_usd=None, now=1.0)
    assert admit(c, demand(scope), 1.0).refusal is None


def test_a_lease_expires_ten_minutes_after_admission():
    c, scope = Counters(), key_scope(max_concurrent=1)
    assert admit(c, demand(scope), 0.0).refusal is None              # never settled
    assert admit(c, demand(scope), 599.999).refusal is not None
    assert admit(c, demand(scope), 600.0).refusal is None


# --- budgets ----------------------------------------------------------------------------------

def test_a_day_bucket_runs_from_utc_midnight_to_the_next():
    bucket = core.bucket_of(Period.DAY, utc(2026, 3, 10, 23, 59, 59))
    assert bucket == core.Bucket("2026-03-10", utc(2026, 3, 10), utc(2026, 3, 11))
    assert core.bucket_of(Period.DAY, utc(2026, 3, 11)).name == "2026-03-11"


def test_a_week_bucket_is_the_iso_week_from_monday_utc():
    assert core.bucket_of(Period.WEEK, WALL) == core.Bucket("2026-W11", utc(2026, 3, 9), utc(2026, 3, 16))
    # across a year end: 2020-12-31 (Thursday) and 2021-01-03 (Sunday) are both in 2020's 53rd week
    assert core.bucket_of(Period.WEEK, utc(2020, 12, 31, 8)) == \
        core.Bucket("2020-W53", utc(2020, 12, 28), utc(2021, 1, 4))
    assert core.bucket_of(Period.WEEK, utc(2021, 1, 3, 23, 59, 59)).name == "2020-W53"
    assert core.bucket_of(Period.WEEK, utc(2021, 1, 4)).name == "2021-W01"
    assert core.bucket_of(Period.WEEK, utc(2024, 12, 30)).name == "2025-W01"   # a Monday in ISO 2025


def test_a_month_bucket_ends_at_the_first_of_the_next_month():
    assert core.bucket_of(Period.MONTH, utc(2024, 2, 29, 23, 59, 59)) == \
        core.Bucket("2024-02", utc(2024, 2, 1), utc(2024, 3, 1))
    assert core.bucket_of(Period.MONTH, utc(2025, 12, 31, 23)) == \
        core.Bucket("2025-12", utc(2025, 12, 1), utc(2026, 1, 1))
    assert core.bucket_of(Period.MONTH, utc(2026, 1, 1)).name == "2026-01"


def test_a_total_budget_has_one_bucket_that_never_ends():
    assert core.bucket_of(Period.TOTAL, WALL) == core.Bucket("total", None, None)
    assert core.bucket_expiry(core.bucket_of(Period.TOTAL, WALL)) is None


def test_a_budget_bucket_expires_two_periods_after_it_ends():
    assert core.bucket_expiry(core.bucket_of(Period.DAY, WALL)) == utc(2026, 3, 13)
    assert core.bucket_expiry(core.bucket_of(Period.WEEK, WALL)) == utc(2026, 3, 30)


def test_a_budget_reserves_the_worst_case_and_settles_to_the_real_cost():
    c = Counters()
    line = budget_line(limit_usd=1.0, worst_usd=0.4)
    first = demand(budgets=(line,))
    d1 = admit(c, first, 0.0)
    assert d1.refusal is None and d1.buckets == ("2026-03",)
    assert admit(c, demand(budgets=(line,)), 0.0).refusal is None
    refusal = admit(c, demand(budgets=(line,)), 0.0).refusal        # 0.8 reserved + 0.4 > 1.0
    assert (refusal.scope, refusal.name, refusal.dimension, refusal.limit) == ("key", "team-a", "budget_usd", 1.0)
    settle(c, first, d1.buckets, tokens_used=50, cost_usd=0.1, now=1.0)
    state = c.budgets[("key", "team-a", "2026-03")]
    assert (state.spent_usd, state.reserved_usd, state.spent_tokens) == (0.1, pytest.approx(0.4), 50)
    assert admit(c, demand(budgets=(line,)), 1.0).refusal is None    # 0.1 + 0.4 + 0.4 <= 1.0


def test_a_call_whose_worst_case_exactly_reaches_the_budget_is_admitted():
    c = Counters()
    line = budget_line(limit_usd=0.3, worst_usd=0.1)
    assert [admit(c, demand(budgets=(line,)), 0.0).refusal is None for _ in range(4)] == [True] * 3 + [False]


def test_a_token_budget_counts_input_and_output_tokens():
    c = Counters()
    line = budget_line(limit_tokens=1000, tokens=600)
    first = demand(budgets=(line,))
    d1 = admit(c, first, 0.0)
    refusal = admit(c, demand(budgets=(line,)), 0.0).refusal
    assert (refusal.dimension, refusal.limit) == ("budget_tokens", 1000)
    settle(c, first, d1.buckets, tokens_used=300, cost_usd=None, now=0.0)
    assert admit(c, demand(budgets=(line,)), 0.0).refusal is None    # 300 spent + 600


def test_an_unpriced_model_reserves_no_usd_yet_its_tokens_count():
    c = Counters()
    line = budget_line(limit_usd=0.01, limit_tokens=100, worst_usd=0.0, tokens=60)
    d = demand(budgets=(line,))
    assert admit(c, d, 0.0).refusal is None
    settle(c, d, ("2026-03",), tokens_used=60, cost_usd=None, now=0.0)
    state = c.budgets[("key", "team-a", "2026-03")]
    assert (state.spent_usd, state.spent_tokens) == (0.0, 60)
    assert admit(c, demand(budgets=(line,)), 0.0).refusal.dimension == "budget_tokens"


def test_a_budget_refusal_retries_when_its_period_ends():
    c = Counters()
    day = budget_line(limit_usd=1.0, worst_usd=2.0, period=Period.DAY)
    assert admit(c, demand(budgets=(day,)), 0.0).refusal.retry_after == utc(2026, 3, 11) - WALL
    total = budget_line(limit_usd=1.0, worst_usd=2.0, period=Period.TOTAL)
    assert admit(c, demand(budgets=(total,)), 0.0).refusal.retry_after is None


def test_a_new_period_starts_a_new_bucket():
    c = Counters()
    line = budget_line(limit_usd=1.0, worst_usd=1.0, period=Period.DAY)
    d = demand(budgets=(line,))
    first = admit(c, d, 0.0, wall=utc(2026, 3, 10, 23, 59))
    settle(c, d, first.buckets, tokens_used=10, cost_usd=1.0, now=0.0)
    assert admit(c, demand(budgets=(line,)), 0.0, wall=utc(2026, 3, 10, 23, 59, 59)).refusal is not None
    assert admit(c, demand(budgets=(line,)), 0.0, wall=utc(2026, 3, 11)).refusal is None


def test_settle_lands_in_the_bucket_the_call_was_admitted_in():
    c = Counters()
    line = budget_line(limit_usd=5.0, worst_usd=1.0, period=Period.DAY)
    d = demand(budgets=(line,))
    decision = admit(c, d, 0.0, wall=utc(2026, 3, 10, 23, 59, 59))
    settle(c, d, decision.buckets, tokens_used=1, cost_usd=0.5, now=2.0)   # ends after midnight
    assert c.budgets[("key", "team-a", "2026-03-10")].spent_usd == 0.5
    assert ("key", "team-a", "2026-03-11") not in c.budgets


def test_the_seeded_spend_counts_against_the_budget():
    c = Counters()
    line = budget_line(limit_usd=1.0, worst_usd=0.3)
    c.budget("key", "team-a", core.bucket_of(Period.MONTH, WALL)).seed_usd = 0.75
    assert admit(c, demand(budgets=(line,)), 0.0).refusal.dimension == "budget_usd"


# --- all or nothing, and the order of refusals -------------------------------------------------

def test_a_refusal_changes_nothing():
    c = Counters()
    ok = Scope("global", "", RateLimit(requests_per_minute=100, tokens_per_minute=10_000, max_concurrent=10))
    full = Scope("model", "m", RateLimit(requests_per_minute=1))
    line = budget_line(limit_usd=10.0, limit_tokens=10_000, worst_usd=1.0, tokens=100)
    assert admit(c, demand(full), 0.0).refusal is None
    before = (dict(c.tat), {k: dict(v) for k, v in c.leases.items()}, dict(c.budgets))
    refusal = admit(c, demand(ok, full, tokens=100, budgets=(line,)), 0.0).refusal
    assert (refusal.scope, refusal.dimension) == ("model", "requests_per_minute")
    assert (dict(c.tat), {k: dict(v) for k, v in c.leases.items()}, dict(c.budgets)) == before


def test_an_admission_reserves_in_every_scope_and_budget_at_once():
    c = Counters()
    scopes = (Scope("global", "", RateLimit(requests_per_minute=60, max_concurrent=5)),
              key_scope(tokens_per_minute=600))
    line = budget_line(limit_usd=10.0, worst_usd=1.5, tokens=50)
    d = demand(*scopes, tokens=50, budgets=(line,))
    assert admit(c, d, 0.0).refusal is None
    assert c.tat == {("global", "", "requests_per_minute"): 1.0, ("key", "team-a", "tokens_per_minute"): 5.0}
    assert c.leases == {("global", ""): {d.call_id: 600.0}}
    state = c.budgets[("key", "team-a", "2026-03")]
    assert (state.reserved_usd, state.reserved_tokens) == (1.5, 50)


def test_the_refusal_reported_follows_the_contract_order():
    """budget (key, then organization), global, per_client_ip, per_key, per_organization, per_model;
    within a scope max_concurrent, requests_per_second, requests_per_minute, tokens_per_minute."""
    exhausted = RateLimit(requests_per_second=1, requests_per_minute=1, tokens_per_minute=10, max_concurrent=1)
    kinds = [("global", ""), ("client_ip", "10.0.0.1"), ("key", "team-a"), ("organization", "acme"), ("model", "m")]
    budgets = [budget_line(limit_usd=1.0, worst_usd=5.0, owner="organization", owner_id="acme"),
               budget_line(limit_usd=1.0, worst_usd=5.0)]
    c = Counters()
    for kind, name in kinds:   # fill every window and slot of every scope
        admit(c, demand(Scope(kind, name, exhausted), tokens=10), 0.0)
    scopes = [Scope(kind, name, exhausted) for kind, name in reversed(kinds)]   # the demand's order is no order
    seen = []
    while budgets:
        refusal = admit(c, demand(*scopes, tokens=10, budgets=tuple(budgets)), 0.0).refusal
        seen.append((refusal.scope, refusal.dimension))
        budgets = [b for b in budgets if (b.owner, b.owner_id) != (refusal.scope, refusal.name)]
    for kind, _name in kinds:
        for dimension in core.DIMENSIONS:
            refusal = admit(c, demand(*scopes, tokens=10), 0.0).refusal
            seen.append((refusal.scope, refusal.dimension))
            scopes = [attrs_without(s, dimension) if s.kind == kind else s for s in scopes]
        scopes = [s for s in scopes if s.kind != kind]
    assert seen == [("key", "budget_usd"), ("organization", "budget_usd")] + \
        [(kind, dimension) for kind, _ in kinds for dimension in core.DIMENSIONS]


def attrs_without(scope: Scope, dimension: str) -> Scope:
    import attrs
    return attrs.evolve(scope, limit=attrs.evolve(scope.limit, **{dimension: None}))


def test_within_one_budget_usd_is_judged_before_tokens():
    c = Counters()
    line = budget_line(limit_usd=1.0, limit_tokens=10, worst_usd=2.0, tokens=20)
    assert admit(c, demand(budgets=(line,)), 0.0).refusal.dimension == "budget_usd"


def test_counts_are_kept_by_scope_so_a_new_limit_judges_the_calls_already_counted():
    """A window's state is time owed (TAT): calls counted under the old limit keep their weight."""
    c = Counters()
    for _ in range(5):
        admit(c, demand(key_scope(requests_per_minute=10)), 0.0)    # 5 * 6s = 30s of the minute used
    lowered = key_scope(requests_per_minute=5)                      # 12s a call: two more fit, not five
    assert [admit(c, demand(lowered), 0.0).refusal is None for _ in range(3)] == [True, True, False]


# --- header quotas ----------------------------------------------------------------------------

def test_the_request_quota_is_the_key_window_with_fewest_left():
    c, scope = Counters(), key_scope(requests_per_second=2, requests_per_minute=100)
    decision = admit(c, demand(scope), 0.0)
    assert decision.requests == core.Quota(limit=2, remaining=1, reset=0.5)
    c2, scope2 = Counters(), key_scope(requests_per_second=100, requests_per_minute=100)
    assert admit(c2, demand(scope2), 0.0).requests.limit == 100     # a tie: the per-minute window


def test_a_call_with_no_key_scope_gets_no_quotas():
    decision = admit(Counters(), demand(Scope("global", "", RateLimit(requests_per_minute=5))), 0.0)
    assert (decision.requests, decision.tokens) == (None, None)


def test_a_refused_call_still_reports_the_key_s_quotas():
    c, scope = Counters(), key_scope(requests_per_minute=1)
    admit(c, demand(scope), 0.0)
    decision = admit(c, demand(scope), 30.0)
    assert decision.refusal is not None
    assert decision.requests == core.Quota(limit=1, remaining=0, reset=30.0)


# --- a share of the limits --------------------------------------------------------------------

def test_a_share_of_n_enforces_one_nth_of_every_rate_and_slot():
    c = Counters(share=3)
    scope = key_scope(requests_per_minute=30, max_concurrent=7)
    assert [admit(c, demand(scope), 0.0).refusal is None for _ in range(3)] == [True, True, False]   # 7 // 3
    c = Counters(share=3)
    scope = key_scope(requests_per_minute=30)
    assert [admit(c, demand(scope), 0.0).refusal is None for _ in range(11)] == [True] * 10 + [False]


def test_a_share_keeps_at_least_one_slot_and_one_call_per_interval():
    c = Counters(share=4)
    assert admit(c, demand(key_scope(max_concurrent=2)), 0.0).refusal is None
    scope = key_scope(requests_per_second=2)                        # 0.5 a second: one every 2s
    assert admit(c, demand(scope), 0.0).refusal is None
    assert admit(c, demand(scope), 1.9).refusal is not None
    assert admit(c, demand(scope), 2.0).refusal is None


def test_a_share_counts_local_budget_use_n_times_against_what_the_ledger_left():
    c = Counters(share=2)
    c.budget("key", "team-a", core.bucket_of(Period.MONTH, WALL)).seed_usd = 4.0
    line = budget_line(limit_usd=10.0, worst_usd=1.0)
    assert [admit(c, demand(budgets=(line,)), 0.0).refusal is None for _ in range(4)] == [True] * 3 + [False]


def test_a_share_is_a_positive_integer():
    with pytest.raises(ValueError, match="share must be an integer >= 1, got 0"):
        Counters(share=0)


# --- building a demand ------------------------------------------------------------------------

def test_scopes_for_a_call_apply_overrides_and_skip_unlimited_scopes():
    limits = RateLimiting(global_=RateLimit(requests_per_second=100), per_client_ip=RateLimit(requests_per_minute=600),
                          per_key=RateLimit(requests_per_minute=100, tokens_per_minute=1000),
                          per_organization=RateLimit(requests_per_minute=1000, max_concurrent=5),
                          per_model={"m": RateLimit(requests_per_minute=500)})
    orgs = {"acme": Organization("acme", rate_limit=RateLimit(max_concurrent=9))}
    key = ApiKey("team-a", "k" * 20, organization_id="acme", rate_limit=RateLimit(requests_per_minute=300))
    scopes = core.scopes_for(limits, orgs, key, "10.0.0.1", "m")
    assert [(s.kind, s.name, s.limit) for s in scopes] == [
        ("global", "", RateLimit(requests_per_second=100)),
        ("client_ip", "10.0.0.1", RateLimit(requests_per_minute=600)),
        ("key", "team-a", RateLimit(requests_per_minute=300, tokens_per_minute=1000)),
        ("organization", "acme", RateLimit(requests_per_minute=1000, max_concurrent=9)),
        ("model", "m", RateLimit(requests_per_minute=500)),
    ]
    assert core.scopes_for(RateLimiting(per_model={"m": RateLimit(max_concurrent=1)}), {}, None, "10.0.0.1", "x") == ()


def test_budgets_for_a_call_are_the_key_s_then_its_organization_s():
    orgs = {"acme": Organization("acme", budget=Budget(limit_usd=500.0))}
    key = ApiKey("team-a", "k" * 20, organization_id="acme", budget=Budget(limit_tokens=10))
    lines = core.budgets_for(orgs, key, worst_usd=0.25, tokens=99)
    assert [(b.owner, b.owner_id, b.budget, b.worst_usd, b.tokens) for b in lines] == [
        ("key", "team-a", Budget(limit_tokens=10), 0.25, 99),
        ("organization", "acme", Budget(limit_usd=500.0), 0.25, 99)]
    assert core.budgets_for(orgs, None, 1.0, 1) == ()


def test_the_token_reservation_is_the_input_estimate_plus_the_output_cap():
    from switchyard.actors.routing.token_estimate import estimate_tokens

    body = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}
    estimate = estimate_tokens(body, image_tokens=1000)
    assert core.token_reservation({**body, "max_tokens": 50}, 8000) == estimate + 50
    assert core.token_reservation({**body, "max_completion_tokens": 70}, 8000) == estimate + 70
    assert core.token_reservation({**body, "max_output_tokens": 90}, None) == estimate + 90
    assert core.token_reservation(body, 8000) == estimate + 8000
    assert core.token_reservation(body, None) == estimate + 4096


# --- housekeeping and views -------------------------------------------------------------------

def test_prune_drops_idle_windows_ended_leases_and_old_buckets_only():
    c = Counters()
    admit(c, demand(key_scope(requests_per_minute=60, max_concurrent=5)), 0.0)
    live = demand(Scope("global", "", RateLimit(requests_per_minute=1, max_concurrent=5)))
    admit(c, live, 590.0)
    admit(c, demand(budgets=(budget_line(limit_usd=1.0, period=Period.DAY),)), 0.0, wall=utc(2026, 3, 1))
    admit(c, demand(budgets=(budget_line(limit_usd=1.0, period=Period.TOTAL),)), 0.0, wall=utc(2026, 3, 1))
    c.prune(now=600.0, wall=utc(2026, 3, 4))
    assert list(c.tat) == [("global", "", "requests_per_minute")]
    assert c.leases == {("global", ""): {live.call_id: 1190.0}}
    assert list(c.budgets) == [("key", "team-a", "total")]


def test_views_show_windows_leases_and_budget_left():
    c = Counters()
    limit = RateLimit(requests_per_minute=10, max_concurrent=3)
    line = budget_line(limit_usd=2.0, limit_tokens=1000, worst_usd=0.5, tokens=100)
    admit(c, demand(Scope("key", "team-a", limit), budgets=(line,)), 0.0)
    assert core.scope_view(c, "key", "team-a", limit, 0.0) == {
        "windows": {"requests_per_minute": {"limit": 10, "remaining": 9, "reset": 6.0}},
        "in_flight": 1, "max_concurrent": 3}
    assert core.budget_view(c, "key", "team-a", line.budget, WALL) == {
        "period": "month", "bucket": "2026-03", "resets_at": utc(2026, 4, 1),
        "spent_usd": 0.0, "reserved_usd": 0.5, "spent_tokens": 0, "reserved_tokens": 100,
        "limit_usd": 2.0, "left_usd": 1.5, "limit_tokens": 1000, "left_tokens": 900}
