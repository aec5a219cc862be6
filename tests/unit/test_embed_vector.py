"""The semantic cache's reading of an embeddings answer (actors/cache/embed.py ``vector_of``): which answers
give a vector and which are a miss, and why. Its checks run in C over the values; what they accept and refuse
is what the per-value Python checks before them did (``reference``)."""

from __future__ import annotations

import json
import math

import pytest

from switchyard.actors.cache.embed import EmbedFailed, vector_of


def answer(vector) -> bytes:
    return json.dumps({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": vector}],
                       "model": "m", "usage": {"prompt_tokens": 2, "total_tokens": 2}}).encode()


def reference(raw: bytes, dimensions: int | None) -> list[float]:
    """vector_of as it was before its checks moved into C (2026-12-07), for comparison."""
    try:
        vector = json.loads(raw)["data"][0]["embedding"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise EmbedFailed("malformed", "not an embeddings answer") from None
    if not isinstance(vector, list) or not vector or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in vector):
        raise EmbedFailed("malformed", "the embedding is not a list of finite numbers")
    if dimensions is not None and len(vector) != dimensions:
        raise EmbedFailed("wrong_size", f"{len(vector)} dimensions where semantic.dimensions is {dimensions}")
    return [float(x) for x in vector]


def outcome(f, raw: bytes, dimensions: int | None):
    try:
        got = f(raw, dimensions)
    except EmbedFailed as exc:
        return ("failed", exc.reason, str(exc))
    assert all(type(x) is float for x in got)
    return ("vector", got)


CASES = [
    (answer([1, -1] * 768), 1536), (answer([1, -1] * 768), None), (answer([0.25, -1e-3, 3]), None),
    (answer([1, -1] * 768), 1024),                         # wrong_size
    (answer([1.0, True, 0.5]), None), (answer([False]), None),   # a bool is not a number here
    (answer([1.0, "0.5"]), None), (answer([1.0, None]), None), (answer([[1.0]]), None), (answer([{}]), None),
    (answer([]), None), (answer("1,2"), None), (answer({"0": 1.0}), None),
    (b'{"data":[{"embedding":[1.0, NaN]}]}', None), (b'{"data":[{"embedding":[Infinity, 1]}]}', None),
    (b'{"data":[{"embedding":[1e999]}]}', None), (b'{"data":[]}', None), (b'{"data":[{}]}', None),
    (b'not json', None), (b'[1, 2]', None), (b'{"data": "x"}', None),
    (answer([1.5e308, -2.5e-320, 10**30]), None),           # large and subnormal values, a big integer
    (answer([0.5, -1]).decode().encode("utf-16"), 2),       # json sniffs UTF-16; msgspec leaves it to json
]


@pytest.mark.parametrize(("raw", "dimensions"), CASES)
def test_the_answer_reads_as_it_did(raw, dimensions):
    assert outcome(vector_of, raw, dimensions) == outcome(reference, raw, dimensions)


def test_a_vector_comes_back_as_floats_in_order():
    assert vector_of(answer([1, -2, 0.5]), 3) == [1.0, -2.0, 0.5]


def test_an_integer_past_a_float_s_range_is_malformed_not_an_error():
    # the per-value checks let OverflowError out of the lookup; it is a malformed answer, so a miss
    with pytest.raises(EmbedFailed) as caught:
        vector_of(b'{"data":[{"embedding":[1, 1' + b"0" * 400 + b"]}]}", None)
    assert caught.value.reason == "malformed"
