"""Provider rate-limit headers: parsing tables for both providers, normalization, TTL."""

import httpx
import pytest

from switchyard.actors.routing.quota import (
    ABSENT,
    MAX_RAW_LENGTH,
    OBSERVED_USED,
    STALE,
    UNUSABLE,
    number,
    observe_all,
    observed,
    parse,
    rate_limit_headers,
)

A = "anthropic-ratelimit-"
X = "x-ratelimit-"


# --- parsing: ratios per axis --------------------------------------------------------------------

@pytest.mark.parametrize("headers, requests_ratio, tokens_ratio", [
    # Anthropic
    ({A + "requests-limit": "50", A + "requests-remaining": "40"}, 0.8, None),
    ({A + "tokens-limit": "1000", A + "tokens-remaining": "250"}, None, 0.25),
    ({A + "input-tokens-limit": "1000", A + "input-tokens-remaining": "900",
      A + "output-tokens-limit": "100", A + "output-tokens-remaining": "30"}, None, 0.3),   # smallest usable
    ({A + "tokens-limit": "1000", A + "tokens-remaining": "500",
      A + "input-tokens-limit": "1000", A + "input-tokens-remaining": "100"}, None, 0.1),
    ({A + "unified-requests-limit": "10", A + "unified-requests-remaining": "5",
      A + "unified-tokens-limit": "100", A + "unified-tokens-remaining": "75"}, 0.5, 0.75),
    ({A + "requests-limit": "10", A + "requests-remaining": "9",
      A + "unified-requests-limit": "10", A + "unified-requests-remaining": "2"}, 0.2, None),
    # OpenAI
    ({X + "limit-requests": "500", X + "remaining-requests": "499"}, 0.998, None),
    ({X + "limit-tokens": "200000", X + "remaining-tokens": "50000"}, None, 0.25),
    ({X + "limit-requests": "100", X + "remaining-requests": "10",
      X + "limit-tokens": "1000", X + "remaining-tokens": "1000"}, 0.1, 1.0),
    # remaining above the limit clamps to 1
    ({X + "limit-requests": "100", X + "remaining-requests": "150"}, 1.0, None),
    ({X + "limit-requests": "100", X + "remaining-requests": "0"}, 0.0, None),
    # a remaining without its limit is not used
    ({X + "remaining-requests": "10"}, None, None),
    ({A + "tokens-remaining": "10", A + "output-tokens-limit": "100", A + "output-tokens-remaining": "50"},
     None, 0.5),
    # a limit of 0 is unusable
    ({X + "limit-tokens": "0", X + "remaining-tokens": "0"}, None, None),
    # pairs never mix families
    ({A + "requests-remaining": "5", A + "unified-requests-limit": "10"}, None, None),
    # names are case-insensitive; decimals are allowed
    ({"X-RateLimit-Limit-Requests": "8", "X-RateLimit-Remaining-Requests": "2.0"}, 0.25, None),
])
def test_ratio_table(headers, requests_ratio, tokens_ratio):
    snap = parse(headers, now=5.0)
    assert snap is not None and snap.observed_at == 5.0
    assert snap.requests_ratio == (pytest.approx(requests_ratio) if requests_ratio is not None else None)
    assert snap.tokens_ratio == (pytest.approx(tokens_ratio) if tokens_ratio is not None else None)


@pytest.mark.parametrize("value", ["", "   ", "abc", "-5", "1e5", "12abc", "inf", "nan", "0x10", "+3",
                                   "1" * 17, "10000000000000000", "1,000", "1.2.3", "½", "٣", "1.", ".5"])
def test_malformed_values_are_ignored_per_header(value):
    assert number(value) is None
    snap = parse({X + "limit-requests": "100", X + "remaining-requests": value,
                  X + "limit-tokens": "100", X + "remaining-tokens": "40"}, now=0.0)
    assert snap.requests_ratio is None            # the malformed header alone is dropped
    assert snap.tokens_ratio == pytest.approx(0.4)
    assert snap.sources["x-ratelimit-requests"].remaining is None
    assert snap.sources["x-ratelimit-requests"].limit == 100.0


@pytest.mark.parametrize("value, parsed", [("0", 0.0), (" 42 ", 42.0), ("3.5", 3.5),
                                           ("1000000000000000", 1e15)])
def test_number_table(value, parsed):
    assert number(value) == parsed


def test_malformed_limit_makes_the_axis_unusable():
    snap = parse({A + "requests-limit": "lots", A + "requests-remaining": "5"}, now=0.0)
    assert snap.requests_ratio is None and not snap.usable
    assert snap.raw == {A + "requests-limit": "lots", A + "requests-remaining": "5"}


def test_no_recognized_header_is_no_snapshot():
    assert parse({"content-type": "application/json", X + "reset-requests": "1s"}, now=0.0) is None
    assert parse({}, now=0.0) is None


def test_raw_keeps_recognized_headers_only_and_cut():
    snap = parse({X + "remaining-tokens": "7" * 200, X + "reset-tokens": "6m0s", "server": "x"}, now=1.0)
    assert list(snap.raw) == [X + "remaining-tokens"]
    assert len(snap.raw[X + "remaining-tokens"]) == MAX_RAW_LENGTH


def test_remaining_without_limit_is_kept_for_the_admin_view():
    snap = parse({X + "remaining-requests": "10"}, now=0.0)
    src = snap.sources["x-ratelimit-requests"]
    assert (src.axis, src.remaining, src.limit, src.ratio) == ("requests", 10.0, None, None)
    assert snap.raw == {X + "remaining-requests": "10"}


def test_header_shapes_accepted():
    pairs = [(b"x-ratelimit-limit-requests", b"10"), (b"x-ratelimit-remaining-requests", b"5")]
    assert parse(pairs, now=0.0).requests_ratio == 0.5
    h = httpx.Headers({"X-Ratelimit-Limit-Requests": "10", "x-ratelimit-remaining-requests": "4"})
    assert parse(h, now=0.0).requests_ratio == 0.4


def test_repeated_header_last_wins():
    pairs = [(X + "limit-requests", "10"), (X + "remaining-requests", "9"), (X + "remaining-requests", "1")]
    assert parse(pairs, now=0.0).requests_ratio == pytest.approx(0.1)


def test_rate_limit_headers_filters_by_prefix():
    h = {"Content-Type": "x", "Anthropic-Ratelimit-Tokens-Limit": "1", "x-ratelimit-reset-tokens": "1s"}
    assert rate_limit_headers(h) == (("anthropic-ratelimit-tokens-limit", "1"), ("x-ratelimit-reset-tokens", "1s"))


# --- freshness and reasons -----------------------------------------------------------------------

USABLE = {X + "limit-requests": "10", X + "remaining-requests": "5"}


@pytest.mark.parametrize("age, reason", [(0.0, OBSERVED_USED), (45.0, OBSERVED_USED),
                                         (45.000001, STALE), (1000.0, STALE)])
def test_ttl_boundary(age, reason):
    snap = parse(USABLE, now=100.0)
    got, why = observed(snap, 100.0 + age, ttl=45.0)
    assert why == reason
    assert (got is snap) is (reason == OBSERVED_USED)


def test_reasons_absent_and_unusable():
    assert observed(None, 0.0, 45.0) == (None, ABSENT)
    assert observed(parse({X + "remaining-requests": "5"}, now=0.0), 1.0, 45.0) == (None, UNUSABLE)


def test_observe_all_for_one_pick():
    view = {"fresh": parse(USABLE, now=90.0), "old": parse(USABLE, now=0.0),
            "odd": parse({X + "limit-tokens": "0", X + "remaining-tokens": "0"}, now=90.0)}
    usable, reasons = observe_all(["fresh", "old", "odd", "none"], view, now=100.0, ttl=45.0)
    assert list(usable) == ["fresh"]
    assert reasons == {"fresh": OBSERVED_USED, "old": STALE, "odd": UNUSABLE, "none": ABSENT}
