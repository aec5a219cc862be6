"""Database keys' secrets: the shape and its checksum, the public prefix, the keyed digest."""

import hashlib
import hmac
import re
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.actors.control.secrets import Kind, check, digest, make, public_prefix

B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
RANDOM = st.binary(min_size=32, max_size=32)
KINDS = st.sampled_from(list(Kind))


def b62(n: int, width: int) -> str:
    return "".join(B62[n // 62**i % 62] for i in reversed(range(width)))


def checksummed(text: str) -> str:
    """``text`` with a correct checksum after it: what is refused then is refused for its shape alone."""
    return text + b62(zlib.crc32(text.encode()), 6)


@settings(max_examples=200)
@given(RANDOM, KINDS)
def test_a_made_secret_has_the_shape_carries_its_bytes_and_checks_as_its_kind(random, kind):
    secret = make(random, kind)
    assert re.fullmatch(kind.value + "[0-9A-Za-z]{49}", secret)
    assert int.from_bytes(random, "big") == sum(B62.index(c) * 62**i for i, c in enumerate(reversed(secret[4:47])))
    assert secret == checksummed(secret[:47])
    assert check(secret) is kind
    assert check(secret.encode()) is kind
    assert make(random, kind) == secret


def test_the_format_is_fixed():
    # A stored prefix and every scanner's pattern depend on it: any change here is a format change.
    assert make(bytes(32)) == "syk_" + "0" * 43 + "472rzI"
    assert make(b"\xff" * 32, Kind.ADMIN) == "sya_" + b62(2**256 - 1, 43) + b62(zlib.crc32(
        ("sya_" + b62(2**256 - 1, 43)).encode()), 6)


def test_make_wants_exactly_32_random_bytes():
    with pytest.raises(ValueError, match="32 random bytes, got 31"):
        make(bytes(31))


@settings(max_examples=15, deadline=None)
@given(RANDOM, KINDS)
def test_every_single_character_change_is_refused(random, kind):
    secret = make(random, kind)
    for i, old in enumerate(secret):
        for new in B62 + "_-+/= \x00é\u0660":
            if new != old:
                changed = secret[:i] + new + secret[i + 1:]
                assert check(changed) is None, (i, new)
                assert check(changed.encode()) is None, (i, new)


@pytest.mark.parametrize("head", ["syx_", "SYK_", "syk-", "sk-_", "ghp_", "syk0"])
def test_a_wrong_start_is_refused(head):
    assert check(checksummed(head + "A" * 43)) is None


@pytest.mark.parametrize("body", ["A" * 42, "A" * 44, "", "A" * 86])
def test_a_wrong_length_is_refused(body):
    assert check(checksummed("syk_" + body)) is None
    assert check("") is None


@pytest.mark.parametrize("bad", ["-", "_", " ", "\t", "é", "\u0660", "\uff21"])   # ٠ and Ａ: isalnum, not ASCII
def test_a_character_outside_base62_is_refused(bad):
    secret = checksummed("syk_" + "A" * 42 + bad)
    assert len(secret) == 53
    assert check(secret) is None
    assert check(secret.encode("utf-8")) is None
    assert check(b"syk_" + b"A" * 42 + b"\xe9" + checksummed("syk_" + "A" * 43)[-6:].encode()) is None


def test_a_body_carrying_more_than_256_bits_is_refused():
    top = b62(2**256 - 1, 43)
    assert check(checksummed("syk_" + top)) is Kind.KEY
    assert check(checksummed("syk_" + b62(2**256, 43))) is None
    assert check(checksummed("syk_" + "z" * 43)) is None


def test_the_public_prefix_is_the_first_twelve_characters():
    secret = make(bytes.fromhex("0123456789abcdef" * 4))
    assert public_prefix(secret) == secret[:12]
    assert public_prefix(secret.encode()) == secret[:12]
    assert public_prefix(make(bytes(32))) == "syk_00000000"


def test_the_digest_is_hmac_sha256_under_the_server_secret():
    secret = make(bytes(range(32))).encode()
    one = digest(secret, b"server secret one")
    assert one == hmac.new(b"server secret one", secret, hashlib.sha256).digest()
    assert len(one) == 32
    assert digest(secret, b"server secret one") == one
    assert digest(secret, b"server secret two") != one
    assert one != hashlib.sha256(secret).digest()   # a copy of the database cannot be matched by plain hashing
    assert digest(make(bytes(32)).encode(), b"server secret one") != one
