"""QuotaObserver: observe -> view, one snapshot per backend, TTL expiry, a full mailbox drops (autojump_clock)."""

import attrs
import pytest
import trio
import trio.testing

from switchyard.actors.quota import QuotaObserver
from switchyard.actors.routing.quota import ABSENT, OBSERVED_USED, STALE, observed
from switchyard.config.load import load_text

CONFIG = """
backends:
  - {name: a, url: 'http://a:1', models: [m]}
  - {name: b, url: 'http://b:1', models: [m]}
routing:
  usage_weight: {enabled: true}
  quota_aware: {enabled: true, ttl: 45s}
"""

OPENAI = {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "25",
          "content-type": "application/json"}


def snapshot(text=CONFIG):
    return load_text(text, env={}).snapshot


async def started(nursery, text=CONFIG, **kw):
    actor = QuotaObserver(snapshot(text), **kw)
    await nursery.start(actor.run)
    return actor


async def test_observe_updates_the_view(autojump_clock, nursery):
    actor = await started(nursery)
    now = trio.current_time()
    actor.observe("a", OPENAI, now)
    await trio.testing.wait_all_tasks_blocked()
    snap = actor.view["a"]
    assert (snap.observed_at, snap.requests_ratio, snap.tokens_ratio) == (now, 0.25, None)
    assert dict(snap.raw) == {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "25"}
    assert "b" not in actor.view


async def test_one_snapshot_per_backend_replaced_by_each_response(autojump_clock, nursery):
    actor = await started(nursery)
    actor.observe("a", OPENAI, trio.current_time())
    actor.observe("b", {"anthropic-ratelimit-tokens-limit": "1000", "anthropic-ratelimit-tokens-remaining": "10"},
                  trio.current_time())
    await trio.sleep(1)
    actor.observe("a", {"anthropic-ratelimit-tokens-limit": "10", "anthropic-ratelimit-tokens-remaining": "5"},
                  trio.current_time())
    await trio.testing.wait_all_tasks_blocked()
    a, b = actor.view["a"], actor.view["b"]
    assert (a.requests_ratio, a.tokens_ratio) == (None, 0.5)    # replaced, not merged
    assert b.tokens_ratio == 0.01


async def test_view_is_replaced_wholesale_never_mutated(autojump_clock, nursery):
    actor = await started(nursery)
    before = actor.view
    actor.observe("a", OPENAI, trio.current_time())
    await trio.testing.wait_all_tasks_blocked()
    assert before == {} and actor.view is not before
    with pytest.raises(TypeError):
        actor.view["b"] = None


async def test_response_without_rate_limit_headers_keeps_the_old_snapshot(autojump_clock, nursery):
    actor = await started(nursery)
    actor.observe("a", OPENAI, trio.current_time())
    await trio.testing.wait_all_tasks_blocked()
    first = actor.view["a"]
    actor.observe("a", {"content-type": "text/plain"}, trio.current_time() + 1)
    await trio.testing.wait_all_tasks_blocked()
    assert actor.view["a"] is first and actor.mailbox.dropped == 0


async def test_ttl_expiry_at_exact_instants(autojump_clock, nursery):
    actor = await started(nursery)
    t0 = trio.current_time()
    actor.observe("a", OPENAI, t0)
    ttl = actor.snapshot.routing.quota_aware.ttl
    await trio.sleep(ttl)
    assert trio.current_time() - t0 == 45.0
    assert observed(actor.view.get("a"), trio.current_time(), ttl)[1] == OBSERVED_USED
    await trio.sleep(0.001)
    assert observed(actor.view.get("a"), trio.current_time(), ttl)[1] == STALE
    assert observed(actor.view.get("b"), trio.current_time(), ttl)[1] == ABSENT
    actor.observe("a", OPENAI, trio.current_time())          # a new response refreshes it
    await trio.testing.wait_all_tasks_blocked()
    assert observed(actor.view.get("a"), trio.current_time(), ttl)[1] == OBSERVED_USED


async def test_older_observation_never_replaces_a_newer_one(autojump_clock, nursery):
    actor = await started(nursery)
    t = trio.current_time()
    actor.observe("a", OPENAI, t + 5)
    actor.observe("a", {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "90"}, t)
    await trio.testing.wait_all_tasks_blocked()
    assert actor.view["a"].requests_ratio == 0.25


async def test_full_mailbox_drops_and_counts_never_blocks(autojump_clock):
    actor = QuotaObserver(snapshot(), capacity=2)            # not running: nothing drains the inbox
    t0 = trio.current_time()
    for _ in range(5):
        actor.observe("a", OPENAI, t0)
    assert trio.current_time() == t0                         # observe is synchronous: no wait at all
    assert actor.dropped == 3
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await trio.testing.wait_all_tasks_blocked()
        assert actor.view["a"].requests_ratio == 0.25        # the kept ones are applied once it runs
        nursery.cancel_scope.cancel()


async def test_a_busy_worker_does_not_outrun_the_observer(autojump_clock, nursery):
    """Ten responses observed in each pass of the scheduler: the observer takes what is queued in one turn,
    so a mailbox of 32 never fills (taking one message a turn, it filled in the fourth pass and dropped)."""
    actor = await started(nursery, capacity=32)
    for n in range(100):
        for backend in ("a", "b") * 5:
            actor.observe(backend, {**OPENAI, "x-ratelimit-remaining-requests": str(n)}, trio.current_time())
        await trio.lowlevel.checkpoint()
    await trio.testing.wait_all_tasks_blocked()
    assert actor.dropped == 0
    assert actor.view["a"].requests_ratio == actor.view["b"].requests_ratio == 0.99


async def test_only_rate_limit_headers_are_queued():
    actor = QuotaObserver(snapshot(), capacity=4)
    actor.observe("a", {"content-type": "x", "server": "y"}, 0.0)
    assert actor.mailbox.inbox.statistics().current_buffer_used == 0
    actor.observe("a", OPENAI, 0.0)
    assert actor.mailbox.inbox.receive_nowait() == (
        "a", (("x-ratelimit-limit-requests", "100"), ("x-ratelimit-remaining-requests", "25")), 0.0)


async def test_observe_never_raises():
    actor = QuotaObserver(snapshot())

    class Broken:
        def items(self):
            raise RuntimeError("boom")
    actor.observe("a", Broken(), 0.0)
    actor.observe("a", None, 0.0)
    actor.observe("a", [("x-ratelimit-limit-requests",)], 0.0)
    assert actor.errors == 3


async def test_disabled_observe_is_a_no_op(autojump_clock, nursery):
    text = CONFIG.replace("quota_aware: {enabled: true, ttl: 45s}", "quota_aware: {enabled: false}")
    actor = await started(nursery, text)
    actor.observe("a", OPENAI, trio.current_time())
    await trio.testing.wait_all_tasks_blocked()
    assert actor.view == {} and actor.mailbox.inbox.statistics().current_buffer_used == 0


async def test_unknown_backend_is_ignored(autojump_clock, nursery):
    actor = await started(nursery)
    actor.observe("nope", OPENAI, trio.current_time())
    await trio.testing.wait_all_tasks_blocked()
    assert actor.view == {}


async def test_reconfigure_forgets_removed_backends_and_everything_when_disabled(autojump_clock, nursery):
    actor = await started(nursery)
    actor.observe("a", OPENAI, trio.current_time())
    actor.observe("b", OPENAI, trio.current_time())
    await trio.testing.wait_all_tasks_blocked()
    only_a = snapshot(CONFIG.replace("  - {name: b, url: 'http://b:1', models: [m]}\n", ""))
    actor.reconfigure(only_a)
    assert set(actor.view) == {"a"}
    actor.reconfigure(attrs.evolve(only_a, routing=attrs.evolve(
        only_a.routing, quota_aware=attrs.evolve(only_a.routing.quota_aware, enabled=False))))
    assert actor.view == {} and not actor.enabled
    actor.observe("a", OPENAI, trio.current_time())
    await trio.testing.wait_all_tasks_blocked()
    assert actor.view == {}
    actor.reconfigure(only_a)                                # switched back on: observes again
    actor.observe("a", OPENAI, trio.current_time())
    await trio.testing.wait_all_tasks_blocked()
    assert set(actor.view) == {"a"}
