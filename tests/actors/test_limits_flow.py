"""Rate limits and budgets on the request path (the in-process limiter), as the client sees them."""

import json

from switchyard.actors.ledger.record import UsageQuery
from tests.harness import chat, gateway, request

BASE = """
health_checks: {interval: 1h}
usage: {ledger: memory}
backends:
  - {name: a, type: simulated, models: [demo, big], simulation: {latency: 10ms, chunks: 4},
     model_configs: [{id: demo, metadata: {pricing: {input_tokens: 1000.0, output_tokens: 1000.0}}}]}
"""
KEYS = """
api_keys:
  - {id: team, key: sk-team-0123456789abcdef, organization_id: acme, LIMIT}
"""
TEAM = [(b"authorization", b"Bearer sk-team-0123456789abcdef")]


def config(limit: str = "", extra: str = "") -> str:
    return BASE + KEYS.replace(", LIMIT", (", " + limit) if limit else "") + extra


async def post(app, body=None, path="/v1/chat/completions", headers=TEAM):
    return await request(app, "POST", path, body or chat(), headers)


async def test_a_key_limited_to_n_requests_a_minute_gets_n_then_a_requests_429(autojump_clock):
    async with gateway(config("rate_limit: {requests_per_minute: 3}")) as app:
        replies = [await post(app) for _ in range(4)]
        assert [r.status for r in replies] == [200, 200, 200, 429]
        err = replies[3].json()["error"]
        assert (err["type"], err["code"]) == ("requests", "rate_limit_exceeded")
        assert replies[3].headers[b"retry-after"] == b"20"   # one request every 20 s
        assert [r.headers[b"x-ratelimit-remaining-requests"] for r in replies] == [b"2", b"1", b"0", b"0"]
        assert replies[0].headers[b"x-ratelimit-limit-requests"] == b"3"


async def test_per_key_defaults_apply_to_every_key_and_a_keys_own_rate_limit_replaces_them(autojump_clock):
    extra = "rate_limiting: {per_key: {requests_per_minute: 1}}\n"
    async with gateway(config("rate_limit: {requests_per_minute: 2}", extra)) as app:
        assert [(await post(app)).status for _ in range(3)] == [200, 200, 429]


async def test_tokens_per_minute_reserves_input_and_max_tokens_and_refuses_as_tokens(autojump_clock):
    import trio
    slow = config("rate_limit: {tokens_per_minute: 1000}").replace("latency: 10ms", "latency: 1s")
    async with gateway(slow) as app:
        replies = []

        async def one():
            replies.append(await post(app, chat(max_tokens=600)))
        async with trio.open_nursery() as n:   # both reserve ~610 tokens at once: one fits
            n.start_soon(one)
            n.start_soon(one)
        assert sorted(r.status for r in replies) == [200, 429]
        refused = next(r for r in replies if r.status == 429)
        assert refused.json()["error"]["type"] == "tokens"
        assert int(refused.headers[b"x-ratelimit-limit-tokens"]) == 1000


async def test_a_calls_unused_token_reservation_is_given_back_when_it_ends(autojump_clock):
    async with gateway(config("rate_limit: {tokens_per_minute: 1000}")) as app:
        # each reserves ~610 and uses ~15: settled, the second fits at once
        assert [(await post(app, chat(max_tokens=600))).status for _ in range(2)] == [200, 200]


async def test_per_model_limits_the_model_that_runs_so_a_preset_cannot_bypass_it(autojump_clock):
    extra = """
rate_limiting: {per_model: {big: {requests_per_minute: 1}}}
request_presets: {fast: {model: big}}
"""
    async with gateway(config(extra=extra)) as app:
        assert (await post(app, chat("big"))).status == 200
        reply = await post(app, {"messages": [{"role": "user", "content": "hi"}], "preset": "fast"})
        assert reply.status == 429 and reply.json()["error"]["type"] == "requests"
        assert (await post(app, chat("demo"))).status == 200   # another model: its own limits


async def test_an_exhausted_budget_is_insufficient_quota_with_no_retry(autojump_clock):
    # demo costs 1000 USD per 1M tokens: ~15 tokens used cost ~0.015 USD; 4,000 reserved ~4 USD
    async with gateway(config("budget: {limit_usd: 0.05, period: day}")) as app:
        first = await post(app, chat(max_tokens=10))
        assert first.status == 200
        refused = [await post(app, chat(max_tokens=4000))]
        err = refused[-1].json()["error"]
        assert refused[-1].status == 429
        assert (err["type"], err["code"]) == ("insufficient_quota", "budget_exceeded")
        assert refused[-1].headers[b"x-should-retry"] == b"false"
        assert b"retry-after" in refused[-1].headers


async def test_a_refusal_is_a_ledger_record_and_a_request_rejected_line(autojump_clock, caplog):
    import logging
    caplog.set_level(logging.INFO, logger="switchyard.route")
    async with gateway(config("rate_limit: {requests_per_minute: 1}")) as app:
        await post(app)
        refused = await post(app)
        await app.runtime.ledger.flush()
        recs = app.runtime.ledger.store.records(UsageQuery(), 10)
    assert sorted(r.status for r in recs) == [200, 429]
    [rec] = [r for r in recs if r.status == 429]
    assert rec.request_id == refused.headers[b"x-continuum-request-id"].decode()
    assert rec.error_code == "rate_limit_exceeded" and rec.key_id == "team"
    lines = [r for r in caplog.records if getattr(r, "event", None) == "request_rejected"]
    assert lines and "key team" in lines[-1].getMessage() and "requests_per_minute" in lines[-1].getMessage()


async def test_the_anthropic_door_gets_anthropic_ratelimit_headers_and_its_error_shape(autojump_clock):
    async with gateway(config("rate_limit: {requests_per_minute: 1}")) as app:
        body = {"model": "demo", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
        headers = [*TEAM, (b"anthropic-version", b"2023-06-01")]
        ok = await post(app, body, "/anthropic/v1/messages", headers)
        refused = await post(app, body, "/anthropic/v1/messages", headers)
    assert ok.headers[b"anthropic-ratelimit-requests-limit"] == b"1"
    assert refused.status == 429 and refused.json()["error"]["type"] == "rate_limit_error"
    assert b"x-ratelimit-limit-requests" not in ok.headers


async def test_a_call_without_limits_has_no_rate_headers(autojump_clock):
    async with gateway(config()) as app:
        reply = await post(app)
    assert reply.status == 200 and not any(h.startswith(b"x-ratelimit") for h in reply.headers)


async def test_max_concurrent_admits_that_many_calls_at_once_and_frees_the_slot_at_the_end(autojump_clock):
    import trio
    slow = config("rate_limit: {max_concurrent: 2}").replace("latency: 10ms", "latency: 1s")
    async with gateway(slow) as app:
        statuses = []

        async def one():
            statuses.append((await post(app)).status)
        async with trio.open_nursery() as n:
            for _ in range(3):
                n.start_soon(one)
        assert sorted(statuses) == [200, 200, 429]
        assert (await post(app)).status == 200   # the slots came back when the calls ended


async def test_admin_keys_shows_the_windows_the_calls_in_flight_and_the_budget_left(autojump_clock):
    admin = "admin: {token: admin-token-0123456789}\n"
    token = [(b"authorization", b"Bearer admin-token-0123456789")]
    async with gateway(config("rate_limit: {requests_per_minute: 5}, budget: {limit_usd: 10.0, period: month}",
                              admin)) as app:
        await post(app)
        view = (await request(app, "GET", "/admin/keys/team", None, token)).json()
        missing = await request(app, "GET", "/admin/keys/nobody", None, token)
    assert view["id"] == "team" and "key" not in view
    assert json.dumps(view).count("sk-team") == 0
    assert view["budget"]["left_usd"] < 10.0
    assert missing.status == 404 and missing.json()["error"]["code"] == "key_not_found"


async def test_admin_config_names_the_global_scope_as_written(autojump_clock):
    from switchyard.config.load import load_text
    from switchyard.protocol.admin.api import public
    shown = public(load_text(config(extra="rate_limiting: {global: {requests_per_minute: 9}}\n")).snapshot)
    assert shown["rate_limiting"]["global"]["requests_per_minute"] == 9 and "global_" not in shown["rate_limiting"]


async def test_a_dedup_follower_cancelled_while_following_gives_its_reservation_back(autojump_clock):
    """Its own actor never runs (the leader's answer was to be its answer), so when its task is cancelled
    from outside (a drain's end, say) the pipeline settles its ticket: the key's slot is not held."""
    import trio
    slow = config("rate_limit: {max_concurrent: 2}", "dedup: {enabled: true}\n").replace("latency: 10ms",
                                                                                          "latency: 1s")
    async with gateway(slow) as app:
        async with trio.open_nursery() as n:
            n.start_soon(post, app)                 # the leader: its flight takes 1 s
            await trio.sleep(0.1)
            with trio.move_on_after(0.3):           # the identical call follows it, then is cancelled
                await post(app)
        statuses = []

        async def one():
            statuses.append((await post(app, chat(max_tokens=7))).status)
        async with trio.open_nursery() as n:        # both slots are free again
            n.start_soon(one)
            n.start_soon(one)
        assert statuses == [200, 200]
