"""protocol/http/limits.py: token buckets, the fixed limits, client identity, X-Forwarded-For, the model-list cache."""

import pytest

from switchyard.protocol.http.limits import (
    EMPTY_TTL_FIRST,
    EMPTY_TTL_MAX,
    GLOBAL,
    MODELS_LIMIT,
    MODELS_TTL,
    REFRESH_LIMIT,
    Bucket,
    ClientRateLimiter,
    Limit,
    ModelListCache,
    Rate,
    client_ip,
    digest,
    empty_ttl,
    full,
    models_client,
    refilled,
    refresh_client,
    wait,
)

# --- buckets -----------------------------------------------------------------------


def test_bucket_refills_evenly_and_never_past_its_size():
    rate = Rate(3, 5.0)  # one token every 5/3 s
    b = Bucket(0.0, 100.0)
    assert refilled(b, rate, 100.0 + 5 / 3).tokens == pytest.approx(1.0)
    assert refilled(b, rate, 1000.0).tokens == 3.0
    assert wait(Bucket(0.4, 0.0), rate) == pytest.approx(1.0)     # 0.6 token missing at 0.6/s
    assert wait(full(rate, 0.0), rate) == 0.0


def test_bucket_ignores_time_going_backwards():
    assert refilled(Bucket(1.0, 10.0), Rate(3, 5.0), 9.0) == Bucket(1.0, 10.0)


def test_rate_describes_itself():
    assert Rate(12, 60.0).describe() == "12 per minute"
    assert Rate(3, 5.0).describe() == "3 per 5s"


def test_fixed_limits_are_the_documented_ones():
    assert (MODELS_LIMIT.burst, MODELS_LIMIT.sustained) == (Rate(10, 5.0), Rate(60, 60.0))
    assert (REFRESH_LIMIT.burst, REFRESH_LIMIT.sustained) == (Rate(3, 5.0), Rate(12, 60.0))


# --- limiter -------------------------------------------------------------------------


def test_limiter_burst_limit_refuses_the_request_after_the_burst():
    lim = ClientRateLimiter(REFRESH_LIMIT)
    assert [lim.check("c", 0.0) for _ in range(3)] == [None] * 3
    refused = lim.check("c", 0.0)
    assert refused is not None and refused.which == "burst" and refused.rate == Rate(3, 5.0)
    assert refused.retry_after == pytest.approx(5 / 3) and refused.retry_after_header == 2
    assert lim.check("c", 5 / 3 - 0.001) is not None
    assert lim.check("c", 5 / 3) is None


def test_limiter_sustained_limit_refuses_once_the_long_bucket_is_empty():
    lim = ClientRateLimiter(REFRESH_LIMIT)
    # 3 every 5 s keeps the burst bucket going; the sustained one (12, +1 every 5 s) drains.
    admitted = {t: sum(lim.check("c", float(t)) is None for _ in range(3)) for t in range(0, 30, 5)}
    assert admitted == {0: 3, 5: 3, 10: 3, 15: 3, 20: 3, 25: 2}
    refused = lim.check("c", 25.0)
    assert refused.which == "sustained" and refused.rate == Rate(12, 60.0)
    assert refused.retry_after == pytest.approx(5.0) and refused.retry_after_header == 5
    # from then on: one every 5 s, the sustained rate
    assert lim.check("c", 30.0) is None and lim.check("c", 30.0).which == "sustained"


def test_limiter_refusal_takes_no_token():
    lim = ClientRateLimiter(Limit("x", burst=Rate(1, 1.0), sustained=Rate(100, 60.0)))
    assert lim.check("c", 0.0) is None
    for t in (0.1, 0.5, 0.9):
        assert lim.check("c", t) is not None
    assert lim.check("c", 1.0) is None  # hammering did not push the retry time back


def test_limiter_clients_have_independent_buckets():
    lim = ClientRateLimiter(REFRESH_LIMIT)
    for _ in range(3):
        lim.check("a", 0.0)
    assert lim.check("a", 0.0) is not None
    assert lim.check("b", 0.0) is None


def test_limiter_first_refusal_of_a_streak_is_marked():
    lim = ClientRateLimiter(Limit("x", burst=Rate(1, 1.0), sustained=Rate(100, 60.0)))
    lim.check("c", 0.0)
    assert [lim.check("c", 0.1).first, lim.check("c", 0.2).first] == [True, False]
    assert lim.check("c", 1.0) is None
    assert lim.check("c", 1.0).first is True


def test_limiter_forgets_idle_then_least_recent_clients_when_full():
    lim = ClientRateLimiter(Limit("x", burst=Rate(1, 1.0), sustained=Rate(1, 1.0)), max_clients=10)
    for i in range(10):
        lim.check(f"c{i}", 0.0)
    assert len(lim) == 10
    lim.check("new", 0.5)              # nobody has refilled yet: the least recent tenth goes
    assert len(lim) == 10 and lim.check("c0", 0.5) is None  # c0 was forgotten: a fresh bucket
    lim.check("later", 5.0)           # everyone refilled by now: all idle clients go
    assert len(lim) == 1


# --- who is asking ---------------------------------------------------------------------


def test_models_client_is_the_bearer_prefix_else_the_ip():
    a = models_client([(b"authorization", b"Bearer sk-0123456789abcdefXXXX")], "1.2.3.4")
    b = models_client([(b"authorization", b"Bearer sk-0123456789abcdefYYYY")], "5.6.7.8")
    assert a == b == "key#" + digest("sk-0123456789abc")   # the first 16 characters decide
    assert "sk-" not in a
    assert models_client([], "1.2.3.4") == "ip 1.2.3.4"
    assert models_client([(b"authorization", b"Bearer ")], "1.2.3.4") == "ip 1.2.3.4"
    assert models_client([(b"authorization", b"Basic dXNlcjpwdw==")], "1.2.3.4") == "ip 1.2.3.4"


def test_refresh_client_unverified_callers_share_the_global_bucket():
    assert refresh_client(None) == GLOBAL
    key = refresh_client("sk-verified-key-0123456789")
    assert key != GLOBAL and "sk-" not in key and key == refresh_client("sk-verified-key-0123456789")


# --- X-Forwarded-For ---------------------------------------------------------------------

TRUSTED = ("10.0.0.0/8", "192.168.1.1/32", "fd00::/8")


def forwarded(*xff):
    return [(b"x-forwarded-for", v.encode()) for v in xff]


@pytest.mark.parametrize("peer, xff, trusted, expected", [
    # an untrusted peer is the client, whatever it claims
    (("203.0.113.5", 4000), ["1.2.3.4"], TRUSTED, "203.0.113.5"),
    # no trusted proxies configured: XFF is never read
    (("10.0.0.2", 4000), ["1.2.3.4"], (), "10.0.0.2"),
    # a trusted peer without XFF is itself the client
    (("10.0.0.2", 4000), [], TRUSTED, "10.0.0.2"),
    # one trusted proxy
    (("10.0.0.2", 4000), ["1.2.3.4"], TRUSTED, "1.2.3.4"),
    # walk from the right, skip trusted hops; the spoofed leftmost entry is ignored
    (("10.0.0.2", 4000), ["6.6.6.6, 1.2.3.4, 10.0.0.9, 192.168.1.1"], TRUSTED, "1.2.3.4"),
    # repeated headers are one list, in order
    (("10.0.0.2", 4000), ["6.6.6.6", "1.2.3.4"], TRUSTED, "1.2.3.4"),
    # every hop trusted: the leftmost
    (("10.0.0.2", 4000), ["10.0.0.5, 10.0.0.9"], TRUSTED, "10.0.0.5"),
    # a non-address stops the walk at the last trusted hop
    (("10.0.0.2", 4000), ["1.2.3.4, unknown, 10.0.0.9"], TRUSTED, "10.0.0.9"),
    (("10.0.0.2", 4000), ["garbage"], TRUSTED, "10.0.0.2"),
    # ports and brackets as some proxies write them
    (("10.0.0.2", 4000), ["1.2.3.4:5555"], TRUSTED, "1.2.3.4"),
    (("10.0.0.2", 4000), ["[2001:db8::1]:443"], TRUSTED, "2001:db8::1"),
    # IPv6 peers and entries; a v4-mapped peer is its IPv4 address
    (("fd00::1", 4000), ["2001:db8::1"], TRUSTED, "2001:db8::1"),
    (("::ffff:10.0.0.2", 4000), ["1.2.3.4"], TRUSTED, "1.2.3.4"),
    (("::ffff:203.0.113.5", 4000), ["1.2.3.4"], TRUSTED, "203.0.113.5"),
    # a /32 trusts exactly one address
    (("192.168.1.2", 4000), ["1.2.3.4"], TRUSTED, "192.168.1.2"),
    # no peer at all (a Unix socket, an in-memory test)
    (None, ["1.2.3.4"], TRUSTED, "unknown"),
])
def test_client_ip_trusts_x_forwarded_for_only_from_trusted_proxies(peer, xff, trusted, expected):
    assert client_ip(peer, forwarded(*xff), trusted) == expected


# --- model-list cache -----------------------------------------------------------------------


def test_empty_list_ttl_starts_at_5s_and_doubles_up_to_60s():
    assert [empty_ttl(n) for n in range(1, 8)] == [5, 10, 20, 40, 60, 60, 60]
    assert (EMPTY_TTL_FIRST, EMPTY_TTL_MAX, MODELS_TTL) == (5.0, 60.0, 30.0)


def test_cache_empty_streak_resets_on_a_non_empty_list():
    cache, snap = ModelListCache(), object()
    assert [cache.put(snap, b"[]", True, 0.0) for _ in range(3)] == [5.0, 10.0, 20.0]
    assert cache.put(snap, b"[x]", False, 0.0) == 30.0
    assert cache.put(snap, b"[]", True, 0.0) == 5.0


def test_cache_serves_until_expiry_exactly():
    cache, snap = ModelListCache(), object()
    cache.put(snap, b"body", False, 100.0)
    assert cache.get(snap, 129.999) == b"body"
    assert cache.get(snap, 130.0) is None


def test_cache_clear_drops_the_body_but_keeps_the_empty_streak():
    cache, snap = ModelListCache(), object()
    cache.put(snap, b"[]", True, 0.0)
    cache.clear()
    assert cache.get(snap, 0.0) is None
    assert cache.put(snap, b"[]", True, 0.0) == 10.0


def test_cache_belongs_to_one_snapshot():
    cache, old, new = ModelListCache(), object(), object()
    cache.put(old, b"[]", True, 0.0)
    assert cache.get(new, 1.0) is None
    assert cache.put(new, b"[]", True, 1.0) == 5.0  # a new config starts the backoff over
