"""GET /admin/traffic through the ASGI app, read through the running LedgerActor from its store
(usage.ledger: memory): points per slot, per model, backend or endpoint, and every parameter's rule."""

from typing import Any
from urllib.parse import quote

import pytest

from switchyard.actors.ledger.record import LedgerRecord, StoreUnavailable
from switchyard.actors.ledger.traffic import BOUNDS_MS
from switchyard.protocol.stores.memory import MemoryStore
from tests.actors.test_admin_usage import AUTH, CONFIG, error_of, get
from tests.harness import gateway

DEC_1 = 1796083200.0         # 2026-12-01T00:00:00Z, a multiple of 86,400
NOW = DEC_1 + 7200 + 30.5    # the wall clock the endpoint reads in these tests: mid-minute


def rec(n: int, at: float, **kw: Any) -> LedgerRecord:
    base: dict[str, Any] = dict(request_id=f"r{n}", time=at, key_id="team-a", organization_id="acme",
                                endpoint="chat", model="demo", served_model="demo", backend="a", attempts=1,
                                status=200, error_code=None, latency_ms=120.0, ttfb_ms=20.0)
    return LedgerRecord(**{**base, **kw})


def with_ledger(app, records) -> None:
    """``records`` in the running ledger's store, and the endpoint's wall clock at NOW."""
    store = app.runtime.ledger.store
    assert isinstance(store, MemoryStore)
    store.write(records)
    app.admin.traffic.clock = lambda: NOW


async def traffic(app, query: str = "") -> dict[str, Any]:
    reply = await get(app, "/admin/traffic", query)
    assert reply.status == 200, reply.body
    return reply.json()


def busy(points: list[dict[str, Any]]) -> list[tuple[float, int]]:
    """(time, requests) of the points that had calls."""
    return [(p["time"], p["requests"]) for p in points if p["requests"]]


async def test_traffic_defaults_to_the_last_hour_by_the_minute(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(1, NOW - 3600.5), rec(2, NOW - 3599), rec(3, NOW - 10), rec(4, NOW + 1)])
        body = await traffic(app)
        assert (body["from"], body["to"], body["step"], body["group_by"]) == (NOW - 3600, NOW, 60, None)
        [series] = body["series"]
        assert series["group"] is None
        times = [p["time"] for p in series["points"]]
        assert times[0] == DEC_1 + 3600 and times[-1] == DEC_1 + 7200 and len(times) == 61
        assert times == list(range(int(DEC_1) + 3600, int(DEC_1) + 7201, 60))
        assert busy(series["points"]) == [(DEC_1 + 3600, 1), (DEC_1 + 7200, 1)]
        assert body["latency_bounds_ms"] == list(BOUNDS_MS)


async def test_traffic_slots_with_no_calls_are_present_with_zeros_and_nulls(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(1, DEC_1 + 5)])
        body = await traffic(app, f"from={DEC_1:.0f}&to={DEC_1 + 180:.0f}")
        assert body["series"][0]["points"][1:] == [
            {"time": DEC_1 + t, "requests": 0, "requests_per_second": 0.0, "errors": 0, "error_rate": None,
             "latency_ms": {"p50": None, "p95": None}, "ttfb_ms": {"p50": None, "p95": None}} for t in (60, 120)]


async def test_traffic_over_no_calls_is_one_series_of_empty_points(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [])
        body = await traffic(app)
        assert [s["group"] for s in body["series"]] == [None] and len(body["series"][0]["points"]) == 61
        assert body["totals"] == [{"group": None, "requests": 0, "errors": 0, "error_rate": None,
                                   "latency_ms": {"p50": None, "p95": None}, "ttfb_ms": {"p50": None, "p95": None}}]
        assert (await traffic(app, "group_by=model"))["series"] == []


async def test_a_point_has_requests_per_second_errors_and_the_error_rate(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(n, DEC_1 + n, status=status) for n, status in
                          enumerate((200, 200, 200, 399, 400, 429, 499, 502))])
        body = await traffic(app, f"from={DEC_1:.0f}&to={DEC_1 + 60:.0f}&step=10")
        assert [(p["requests"], p["requests_per_second"], p["errors"], p["error_rate"])
                for p in body["series"][0]["points"]] == [(8, 0.8, 4, 0.5)] + [(0, 0.0, 0, None)] * 5


async def test_traffic_by_model_is_one_series_a_model_with_none_last(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(1, NOW - 100, model="zeta"), rec(2, NOW - 50, model=None, backend=None),
                          rec(3, NOW - 40, model="<b>alpha</b>"), rec(4, NOW - 30, model="zeta")])
        body = await traffic(app, "group_by=model")
        assert body["group_by"] == "model"
        assert [s["group"] for s in body["series"]] == ["<b>alpha</b>", "zeta", None]
        assert [busy(s["points"]) for s in body["series"]] == [
            [(DEC_1 + 7140, 1)], [(DEC_1 + 7080, 1), (DEC_1 + 7200, 1)], [(DEC_1 + 7140, 1)]]
        assert [(t["group"], t["requests"]) for t in body["totals"]] == [("<b>alpha</b>", 1), ("zeta", 2), (None, 1)]


async def test_traffic_by_backend_is_one_series_a_backend(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(1, NOW - 100, backend="b"), rec(2, NOW - 90, backend="a"),
                          rec(3, NOW - 80, backend="a", model="other")])
        body = await traffic(app, "group_by=backend")
        assert [(t["group"], t["requests"]) for t in body["totals"]] == [("a", 2), ("b", 1)]


async def test_p50_and_p95_of_known_latencies_land_within_their_buckets(autojump_clock):
    """Latencies 1 to 100 ms: the true p50 (50 ms) is in (40, 50], the true p95 (95 ms) in (75, 100]; the
    times to first byte are a tenth of them."""
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(n, NOW - 60 + n * 0.1, latency_ms=float(n), ttfb_ms=n / 10) for n in range(1, 101)])
        [total] = (await traffic(app))["totals"]
        assert total["requests"] == 100
        assert 40 < total["latency_ms"]["p50"] <= 50 and 75 < total["latency_ms"]["p95"] <= 100
        assert 3 < total["ttfb_ms"]["p50"] <= 5 and 7.5 < total["ttfb_ms"]["p95"] <= 10


async def test_the_time_to_first_byte_counts_only_calls_that_sent_a_byte(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(1, NOW - 5, ttfb_ms=None, latency_ms=5000.0), rec(2, NOW - 4, ttfb_ms=2.0)])
        [total] = (await traffic(app))["totals"]
        assert total["ttfb_ms"] == {"p50": 1.5, "p95": 1.95}   # only the one record, in (1, 2]


async def test_slots_are_aligned_to_multiples_of_the_step(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(1, DEC_1 + 601)])
        body = await traffic(app, f"from={DEC_1 + 350:.0f}&to={DEC_1 + 1250:.0f}&step=300")
        assert [p["time"] for p in body["series"][0]["points"]] == [DEC_1 + 300, DEC_1 + 600, DEC_1 + 900,
                                                                    DEC_1 + 1200]
        assert busy(body["series"][0]["points"]) == [(DEC_1 + 600, 1)]


async def test_to_is_exclusive_and_from_inclusive(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(1, DEC_1), rec(2, DEC_1 + 120)])
        body = await traffic(app, f"from={DEC_1:.0f}&to={DEC_1 + 120:.0f}")
        assert [p["time"] for p in body["series"][0]["points"]] == [DEC_1, DEC_1 + 60]
        assert body["totals"][0]["requests"] == 1


async def test_traffic_keeps_the_usage_filters(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(1, NOW - 5), rec(2, NOW - 5, key_id="team-b"), rec(3, NOW - 5, purpose="classifier"),
                          rec(4, NOW - 5, organization_id="other", model="m2", backend="b")])
        assert (await traffic(app, "key=team-a&org=acme&model=demo&backend=a"))["totals"][0]["requests"] == 1
        assert (await traffic(app, "purpose=all"))["totals"][0]["requests"] == 4
        assert (await traffic(app, "purpose=classifier"))["totals"][0]["requests"] == 1
        assert (await traffic(app, "to=2026-12-01T02:00:31Z"))["totals"][0]["requests"] == 3


async def test_traffic_by_endpoint_is_one_series_an_endpoint_and_filters_by_it(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [rec(1, NOW - 5), rec(2, NOW - 65, endpoint="embeddings", status=500),
                          rec(3, NOW - 5, endpoint="embeddings", model="m2"), rec(4, NOW - 5, endpoint="rerank")])
        body = await traffic(app, "group_by=endpoint")
        assert [(t["group"], t["requests"], t["errors"]) for t in body["totals"]] == [
            ("chat", 1, 0), ("embeddings", 2, 1), ("rerank", 1, 0)]
        assert busy(body["series"][1]["points"]) == [(DEC_1 + 7140, 1), (DEC_1 + 7200, 1)]
        only = await traffic(app, "endpoint=embeddings&group_by=model")
        assert [(t["group"], t["requests"]) for t in only["totals"]] == [("demo", 1), ("m2", 1)]


@pytest.mark.parametrize("group_by", ["key", "org", "day", "hour", "MODEL", ""])
async def test_group_by_other_than_model_backend_or_endpoint_is_a_400(autojump_clock, group_by):
    async with gateway(CONFIG) as app:
        error = error_of(await get(app, "/admin/traffic", f"group_by={group_by}"), 400)
        assert error["message"] == f"group_by must be one of model, backend, endpoint, got {group_by!r}"
        assert (error["param"], error["code"]) == ("group_by", "invalid_parameter")


@pytest.mark.parametrize("step", ["9", "86401", "1.5", "abc", "", "-60", "٦٠"])
async def test_step_must_be_whole_seconds_from_10_to_86400(autojump_clock, step):
    async with gateway(CONFIG) as app:
        error = error_of(await get(app, "/admin/traffic", f"step={quote(step)}"), 400)
        assert error["param"] == "step" and "whole number of seconds from 10 to 86400" in error["message"]


async def test_step_may_be_10_or_86400(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [])
        assert len((await traffic(app, "step=10&from=0&to=600"))["series"][0]["points"]) == 60
        assert len((await traffic(app, "step=86400"))["series"][0]["points"]) == 1


async def test_more_than_1440_slots_is_a_400_naming_step(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [])
        assert (await get(app, "/admin/traffic", "from=0&to=86400")).status == 200        # 1,440 minutes
        error = error_of(await get(app, "/admin/traffic", "from=0&to=86401"), 400)
        assert error["param"] == "step" and "at most 1440 slots" in error["message"]


async def test_from_not_before_to_is_a_400(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [])
        error = error_of(await get(app, "/admin/traffic", "from=2026-12-02&to=2026-12-01"), 400)
        assert error["param"] == "from" and error["message"].startswith("from must be earlier than to")


async def test_from_at_or_after_now_without_to_is_a_400(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [])
        error = error_of(await get(app, "/admin/traffic", f"from={NOW + 60:.0f}"), 400)
        assert error["param"] == "from" and "now when to is left out" in error["message"]


async def test_from_alone_reaches_to_now_and_to_alone_reaches_back_an_hour(autojump_clock):
    async with gateway(CONFIG) as app:
        with_ledger(app, [])
        assert [(b["from"], b["to"]) for b in [await traffic(app, f"from={DEC_1:.0f}"),
                                               await traffic(app, f"to={DEC_1:.0f}")]] == [
            (DEC_1, NOW), (DEC_1 - 3600, DEC_1)]


@pytest.mark.parametrize("query, param, code", [
    ("from=yesterday", "from", "invalid_parameter"),
    ("to=2026-12-01T13:00:00", "to", "invalid_parameter"),
    ("key=", "key", "invalid_parameter"),
    ("purpose=robots", "purpose", "invalid_parameter"),
    ("endpoint=chats", "endpoint", "invalid_parameter"),
    ("limit=5", "limit", "unknown_parameter"),
    ("step=60&step=120", "step", "duplicate_parameter"),
])
async def test_a_broken_usage_parameter_is_a_400_naming_it(autojump_clock, query, param, code):
    async with gateway(CONFIG) as app:
        error = error_of(await get(app, "/admin/traffic", query), 400)
        assert (error["param"], error["code"]) == (param, code)


async def test_traffic_needs_the_admin_token_and_is_read_only(autojump_clock):
    async with gateway(CONFIG) as app:
        assert (await get(app, "/admin/traffic", headers=[])).status == 401
        assert (await get(app, "/admin/traffic", method="POST")).status == 405


async def test_traffic_when_the_store_cannot_answer_is_a_503_saying_why(autojump_clock, monkeypatch):
    async with gateway(CONFIG) as app:
        def down(*args: Any) -> None:
            raise StoreUnavailable("usage.db: database is locked")
        monkeypatch.setattr(app.runtime.ledger.store, "traffic", down)
        error = error_of(await get(app, "/admin/traffic"), 503)
        assert error["code"] == "usage_ledger_unavailable"
        assert error["message"] == "The usage ledger's store is unavailable: usage.db: database is locked"


async def test_the_default_clock_is_the_wall_clock(autojump_clock):
    import time
    async with gateway(CONFIG) as app:
        before = time.time()
        body = (await get(app, "/admin/traffic", headers=AUTH)).json()
        assert before <= body["to"] <= time.time() and body["to"] - body["from"] == 3600
