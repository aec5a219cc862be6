"""One test per rule of the limits config (rate_limiting, organizations, api_keys[].rate_limit/budget, state)."""

import attrs
import pytest

from switchyard.config.limits import OnUnavailable, Period, RateLimit
from switchyard.config.load import ConfigError, load_text
from switchyard.config.load_limits import workers_refusal
from switchyard.config.watch import apply_live

MINIMAL = """
backends:
  - name: a
    url: http://127.0.0.1:8000
    models: [m, "fam-*"]
    model_configs:
      - {id: m, aliases: [m-latest]}
"""

KEY = """
api_keys:
  - id: team-a
    key: team-a-secret-0123456789
"""


def load(text: str):
    return load_text(MINIMAL + text, env={})


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(text)
    return info.value.errors


def test_rate_limiting_scopes_load_with_their_dimensions():
    snap = load("""
rate_limiting:
  global: {requests_per_second: 100, requests_per_minute: 5000, tokens_per_minute: 2000000, max_concurrent: 200}
  per_client_ip: {requests_per_minute: 600}
  per_key: {requests_per_minute: 100, tokens_per_minute: 100000, max_concurrent: 10}
  per_organization: {requests_per_minute: 1000}
  per_model: {m: {requests_per_minute: 500, tokens_per_minute: 400000}}
""").snapshot
    rl = snap.rate_limiting
    assert rl.global_ == RateLimit(100, 5000, 2_000_000, 200)
    assert rl.per_client_ip == RateLimit(requests_per_minute=600)
    assert rl.per_key == RateLimit(requests_per_minute=100, tokens_per_minute=100_000, max_concurrent=10)
    assert rl.per_organization == RateLimit(requests_per_minute=1000)
    assert rl.per_model == {"m": RateLimit(requests_per_minute=500, tokens_per_minute=400_000)}
    assert snap.limits_enabled


def test_no_rate_limiting_means_no_scope_and_limits_off():
    snap = load("").snapshot
    assert snap.rate_limiting.global_ is None and snap.rate_limiting.per_model == {}
    assert not snap.limits_enabled


def test_a_rate_limit_naming_no_limit_is_an_error():
    assert errors_of("rate_limiting:\n  global: {}\n") == [
        "rate_limiting.global: names no limit: set requests_per_second, requests_per_minute, "
        "tokens_per_minute or max_concurrent"]


def test_an_unknown_rate_limit_key_is_an_error_with_its_dotted_path():
    errors = errors_of("rate_limiting:\n  per_key: {requests_per_minute: 5, requests_per_hour: 9}\n"
                       "  per_tenant: {requests_per_minute: 5}\n")
    assert errors == ["rate_limiting.per_key.requests_per_hour: unknown key", "rate_limiting.per_tenant: unknown key"]


@pytest.mark.parametrize("value, rule", [
    ("0", "must be at least 1, got 0"),
    ("-3", "must be at least 1, got -3"),
    ("1.5", "must be an integer, got number"),
    ("lots", "must be an integer, got string"),
])
def test_every_dimension_is_a_positive_integer(value, rule):
    for dimension in ("requests_per_second", "requests_per_minute", "tokens_per_minute", "max_concurrent"):
        errors = errors_of(f"rate_limiting:\n  global: {{{dimension}: {value}}}\n")
        assert errors == [f"rate_limiting.global.{dimension}: {rule}"]


def test_a_per_model_entry_is_one_model_not_a_glob():
    assert errors_of("rate_limiting:\n  per_model: {'fam-*': {requests_per_minute: 5}}\n") == [
        "rate_limiting.per_model.fam-*: must be one model's name, not a glob (limits are per model that runs)"]


def test_a_per_model_entry_naming_no_limit_is_an_error_with_its_path():
    assert errors_of("rate_limiting:\n  per_model: {m: {}}\n") == [
        "rate_limiting.per_model.m: names no limit: set requests_per_second, requests_per_minute, "
        "tokens_per_minute or max_concurrent"]


def test_a_per_model_entry_naming_a_model_no_backend_lists_is_a_warning():
    loaded = load("rate_limiting:\n  per_model: {mystery: {requests_per_minute: 5}, fam-1: {max_concurrent: 2},"
                  " m: {max_concurrent: 2}}\n")
    assert loaded.warnings == ("rate_limiting.per_model.mystery: no enabled backend lists this model: "
                               "the limit applies only if a backend discovers it",)
    assert set(loaded.snapshot.rate_limiting.per_model) == {"mystery", "fam-1", "m"}


def test_a_per_model_entry_naming_an_alias_warns_to_name_the_model_that_runs():
    loaded = load("rate_limiting:\n  per_model: {m-latest: {requests_per_minute: 5}}\n")
    assert loaded.warnings == ("rate_limiting.per_model.m-latest: is an alias of 'm'; limits apply to the model "
                               "that runs: name 'm' instead",)


def test_a_key_rate_limit_replaces_the_per_key_dimensions_it_names():
    own = RateLimit(requests_per_minute=300)
    assert own.over(RateLimit(requests_per_minute=100, tokens_per_minute=9, max_concurrent=2)) == \
        RateLimit(requests_per_minute=300, tokens_per_minute=9, max_concurrent=2)
    assert own.over(None) == own


def test_api_keys_carry_their_rate_limit_and_budget():
    snap = load(KEY + "    rate_limit: {requests_per_minute: 300}\n"
                      "    budget: {limit_usd: 50.0, limit_tokens: 10000000, period: day}\n").snapshot
    key = snap.api_keys.keys[0]
    assert key.rate_limit == RateLimit(requests_per_minute=300)
    assert (key.budget.limit_usd, key.budget.limit_tokens, key.budget.period) == (50.0, 10_000_000, Period.DAY)
    assert snap.limits_enabled


def test_a_key_rate_limit_naming_no_limit_is_an_error():
    assert errors_of(KEY + "    rate_limit: {}\n") == [
        "api_keys[0].rate_limit: names no limit: set requests_per_second, requests_per_minute, "
        "tokens_per_minute or max_concurrent"]


def test_a_budget_period_defaults_to_month():
    snap = load(KEY + "    budget: {limit_usd: 5}\n").snapshot
    assert snap.api_keys.keys[0].budget.period is Period.MONTH
    assert snap.api_keys.keys[0].budget.limit_tokens is None


def test_a_budget_naming_no_limit_is_an_error():
    assert errors_of(KEY + "    budget: {period: day}\n") == [
        "api_keys[0].budget: names no limit: set limit_usd, limit_tokens or both"]


@pytest.mark.parametrize("value, rule", [
    ("0", "must be a positive number of US dollars, got 0"),
    ("-1.5", "must be a positive number of US dollars, got -1.5"),
    (".nan", "must be a finite number"),
    (".inf", "must be a finite number"),
    ("ten", "must be a number, got string"),
])
def test_a_budget_limit_usd_is_a_positive_finite_number(value, rule):
    assert errors_of(KEY + f"    budget: {{limit_usd: {value}}}\n") == [f"api_keys[0].budget.limit_usd: {rule}"]


def test_a_budget_limit_tokens_is_a_positive_integer():
    assert errors_of(KEY + "    budget: {limit_tokens: 0}\n") == [
        "api_keys[0].budget.limit_tokens: must be at least 1, got 0"]


def test_a_budget_period_is_day_week_month_or_total():
    assert errors_of(KEY + "    budget: {limit_usd: 1, period: year}\n") == [
        "api_keys[0].budget.period: must be one of day, week, month, total, got 'year'"]


def test_organizations_load_by_id_with_budget_and_rate_limit():
    snap = load("organizations:\n  - id: acme\n    budget: {limit_usd: 500.0, period: week}\n"
                "    rate_limit: {requests_per_minute: 50}\n  - id: other\n").snapshot
    assert list(snap.organizations) == ["acme", "other"]
    acme = snap.organizations["acme"]
    assert (acme.budget.limit_usd, acme.budget.period, acme.rate_limit) == (500.0, Period.WEEK,
                                                                            RateLimit(requests_per_minute=50))
    assert snap.organizations["other"].budget is None


def test_an_organization_id_is_required_and_unique():
    errors = errors_of("organizations:\n  - budget: {limit_usd: 1}\n  - id: acme\n  - id: acme\n")
    assert errors == ["organizations[0].id: is required",
                      "organizations[2].id: duplicate organization id 'acme' (also organizations[1])"]


def test_an_unknown_organization_key_is_an_error_with_its_path():
    assert errors_of("organizations:\n  - {id: acme, budgt: {limit_usd: 1}}\n") == [
        "organizations[0].budgt: unknown key"]


def test_a_key_naming_no_configured_organization_is_fine():
    loaded = load(KEY + "    organization_id: nobody\n")
    assert loaded.snapshot.api_keys.keys[0].organization_id == "nobody" and loaded.warnings == ()


def test_state_defaults_keep_counters_in_memory_and_fail_open():
    state = load("").snapshot.state
    assert (state.redis_url, state.operation_timeout, state.on_unavailable, state.fleet_workers) == \
        (None, 0.05, OnUnavailable.FAIL_OPEN, 1)


def test_state_fleet_workers_defaults_to_server_workers():
    assert load("server: {workers: 4}\n").snapshot.state.fleet_workers == 4
    assert load("server: {workers: 4}\nstate: {fleet_workers: 12}\n").snapshot.state.fleet_workers == 12


def test_state_reads_redis_url_timeout_and_on_unavailable():
    state = load("state: {redis_url: 'rediss://cache.internal:6380/2', operation_timeout: 20ms, "
                 "on_unavailable: fail_closed}\n").snapshot.state
    assert (state.redis_url, state.operation_timeout, state.on_unavailable) == \
        ("rediss://cache.internal:6380/2", 0.02, OnUnavailable.FAIL_CLOSED)


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "redis://", "127.0.0.1:6379", "valkey://h"])
def test_state_redis_url_is_redis_or_rediss_with_a_host(url):
    assert errors_of(f"state: {{redis_url: '{url}'}}\n") == [
        f"state.redis_url: must be a redis:// or rediss:// URL with a host, got {url!r}"]


def test_the_redis_password_is_never_in_an_error():
    errors = errors_of("state: {redis_url: 'http://user:hunter2@cache:6379'}\n")
    assert errors == ["state.redis_url: must be a redis:// or rediss:// URL with a host, got 'http://***@cache:6379'"]


def test_the_redis_password_is_masked_in_admin_config():
    from switchyard.protocol.admin.api import public

    snap = load("state: {redis_url: 'redis://:hunter2@cache:6379/0'}\n").snapshot
    assert public(snap)["state"]["redis_url"] == "redis://:***@cache:6379/0"


@pytest.mark.parametrize("value, rule", [("1ms", "must be at least 0.005s, got '1ms'"),
                                         ("6s", "must be at most 5s, got '6s'")])
def test_state_operation_timeout_is_5ms_to_5s(value, rule):
    assert errors_of(f"state: {{operation_timeout: {value}}}\n") == [f"state.operation_timeout: {rule}"]


def test_state_on_unavailable_is_fail_open_or_fail_closed():
    assert errors_of("state: {on_unavailable: retry}\n") == [
        "state.on_unavailable: must be one of fail_open, fail_closed, got 'retry'"]


def test_an_unknown_state_key_is_an_error():
    assert errors_of("state: {redis: 'redis://h'}\n") == ["state.redis: unknown key"]


def test_new_limits_and_organizations_apply_live_but_state_waits_for_a_restart():
    """The Redis limiter reads state (its URL, timeout and fault mode) when it connects at start."""
    running = load("state: {redis_url: 'redis://a:6379'}\n").snapshot
    new = load("rate_limiting:\n  per_key: {requests_per_minute: 7}\norganizations:\n  - id: acme\n"
               "state: {redis_url: 'redis://b:6379', operation_timeout: 10ms, on_unavailable: fail_closed}\n").snapshot
    applied = apply_live(running, new)
    assert applied.pending_restart == ("state",)
    snap = applied.snapshot
    assert snap.state == running.state
    assert snap.rate_limiting.per_key == RateLimit(requests_per_minute=7) and list(snap.organizations) == ["acme"]


def test_several_workers_with_limits_and_no_redis_are_refused():
    snap = load("rate_limiting:\n  per_key: {requests_per_minute: 100}\n").snapshot
    assert workers_refusal(snap, 4) == (
        "rate_limiting/budgets with 4 workers need state.redis_url (each worker would otherwise allow the whole "
        "limit: 4 times it in all); set it, or run one worker")
    assert workers_refusal(snap, 1) is None
    assert workers_refusal(attrs.evolve(snap, state=attrs.evolve(snap.state, redis_url="redis://h")), 4) is None
    assert workers_refusal(load("").snapshot, 4) is None


def test_a_budget_alone_counts_as_a_limit_for_the_workers_rule():
    snap = load(KEY + "    budget: {limit_usd: 5}\n").snapshot
    assert workers_refusal(snap, 2) is not None
    snap = load("organizations:\n  - {id: acme, budget: {limit_tokens: 5}}\n").snapshot
    assert workers_refusal(snap, 2) is not None


@pytest.mark.parametrize("how", ["flag", "config"])
def test_serve_with_several_workers_limits_and_no_redis_refuses_to_start(tmp_path, monkeypatch, capsys, how):
    from switchyard.protocol.serving import cli
    from switchyard.protocol.serving import workers as serving

    path = tmp_path / "limits.yaml"
    path.write_text(MINIMAL + "rate_limiting:\n  global: {requests_per_second: 10}\n"
                    + ("server: {workers: 3}\n" if how == "config" else ""))
    monkeypatch.setattr(cli, "configure_logging", lambda *args: None)

    def started(*args, **kwargs):
        raise AssertionError("the server started")
    monkeypatch.setattr(serving, "serve_one", started)
    monkeypatch.setattr(serving, "serve_many", started)
    argv = ["serve", "--config", str(path), "--bind", "127.0.0.1:8080"] + (["--workers", "3"] if how == "flag" else [])
    assert cli.main(argv) == 1
    assert capsys.readouterr().err == (
        f"{path}: rate_limiting/budgets with 3 workers need state.redis_url (each worker would otherwise allow "
        "the whole limit: 3 times it in all); set it, or run one worker\n")


def test_serve_with_several_workers_and_redis_starts(tmp_path, monkeypatch):
    from switchyard.protocol.serving import cli
    from switchyard.protocol.serving import workers as serving

    path = tmp_path / "limits.yaml"
    path.write_text(MINIMAL + "rate_limiting:\n  global: {requests_per_second: 10}\n"
                              "state: {redis_url: 'redis://127.0.0.1:6379'}\n")
    monkeypatch.setattr(cli, "configure_logging", lambda *args: None)
    monkeypatch.setattr(serving, "serve_many", lambda *args, **kwargs: 0)
    assert cli.main(["serve", "--config", str(path), "--bind", "127.0.0.1:8080", "--workers", "3"]) == 0
