"""The secrets of database keys and admin tokens: their shape, and the only form of them that is kept.

A secret is ``syk_`` (a client key) or ``sya_`` (an admin token), then 43
base62 characters carrying 32 random bytes (256 bits), then 6 base62
characters of the CRC32 of everything before them. The fixed shape lets
secret scanners find a leaked one with no false positives (they check the
checksum offline, as they do GitHub's tokens), and lets the request path
refuse a mistyped or made-up secret with constant work and no lookup. The
first 12 characters are public: enough to recognise a key in a list, and
8 of the 43 random characters, which leave over 200 bits unknown.

Only ``digest`` of a secret is stored: HMAC-SHA-256 under a server secret
that is not in the database.

- A fast hash is enough. Slow hashes (bcrypt, argon2) make each guess of a
  human-chosen password expensive; a uniformly random 256-bit secret has no
  dictionary to try, and 2^128 guesses of any hash are out of reach. A slow
  hash would only cost every request tens of milliseconds of CPU, and its
  per-record salt would rule out the one thing the request path needs: a
  lookup by digest in an index.
- It is keyed so that a copy of the database alone (a backup, a replica, a
  dump) is not an oracle: without the server secret nobody can test whether
  a secret found elsewhere (a log line, a paste) is a live key, or link one
  key across deployments or to another system holding its plain SHA-256.
  (Changing the server secret therefore orphans every stored digest.)

Pure: no I/O, no clock; the caller draws the random bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import zlib
from enum import Enum

ALPHABET = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"   # in ASCII order
RANDOM_BYTES = 32
_HEAD = 4              # "syk_"
_BODY = 43             # 62**43 > 2**256: the fewest base62 characters that carry 32 bytes
_CHECK = 6             # 62**6 > 2**32
LENGTH = _HEAD + _BODY + _CHECK
PREFIX_LENGTH = 12


class Kind(Enum):
    """What a secret opens, by its first four characters."""

    KEY = "syk_"       # a client key of the data plane
    ADMIN = "sya_"     # an admin token


_KINDS = {kind.value.encode(): kind for kind in Kind}


def _base62(n: int, width: int) -> bytes:
    out = bytearray(width)
    for i in range(width - 1, -1, -1):
        n, digit = divmod(n, 62)
        out[i] = ALPHABET[digit]
    if n:
        raise ValueError(f"{width} base62 characters cannot carry this value")
    return bytes(out)


# The largest body 32 bytes make. The alphabet is in ASCII order and the body has a fixed width, so
# comparing bytes compares the numbers they spell: a body above this carries more than 256 bits.
_MAX_BODY = _base62(2**256 - 1, _BODY)


def _checksum(text: bytes) -> bytes:
    return _base62(zlib.crc32(text), _CHECK)


def make(random: bytes, kind: Kind = Kind.KEY) -> str:
    """The secret carrying ``random`` (pass ``secrets.token_bytes(32)``; deterministic for a given value)."""
    if len(random) != RANDOM_BYTES:
        raise ValueError(f"a secret carries {RANDOM_BYTES} random bytes, got {len(random)}")
    text = kind.value.encode() + _base62(int.from_bytes(random, "big"), _BODY)
    return (text + _checksum(text)).decode("ascii")


def check(presented: bytes | str) -> Kind | None:
    """The kind of a well-formed secret; None for any other value (wrong start, length, character or
    checksum). Constant work, whatever is presented: run it before any lookup."""
    if len(presented) != LENGTH:
        return None
    if isinstance(presented, str):
        if not presented.isascii():
            return None
        presented = presented.encode("ascii")
    kind = _KINDS.get(presented[:_HEAD])
    tail = presented[_HEAD:]
    if kind is None or not tail.isalnum():   # bytes.isalnum: ASCII letters and digits, exactly base62
        return None
    text = presented[:-_CHECK]
    if tail[:_BODY] > _MAX_BODY or _checksum(text) != presented[-_CHECK:]:   # the checksum is no secret
        return None
    return kind


def public_prefix(secret: bytes | str) -> str:
    """The part of a secret that may be shown and stored in clear, e.g. ``syk_Ab12Cd34``."""
    head = secret[:PREFIX_LENGTH]
    return head.decode("ascii", "replace") if isinstance(head, bytes) else head


def digest(secret: bytes, server_secret: bytes) -> bytes:
    """The only form of a secret that is kept: HMAC-SHA-256 under the server secret (see the module's note)."""
    return hmac.new(server_secret, secret, hashlib.sha256).digest()
