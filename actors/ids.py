"""Random ids that must be unique, not secret: request, record, trace and span ids.

The Mersenne Twister is far cheaper per call than the system's entropy
(``secrets`` reads ``os.urandom`` each time, a system call per id); every
worker is a spawned process, so each seeds its own generator from that
entropy when it starts. Anything a client could use to act for someone else
(keys, session cookies) still comes from ``secrets``.
"""

from __future__ import annotations

from random import getrandbits


def random_hex(nbytes: int) -> str:
    """``nbytes`` random bytes as hex, as OpenTelemetry's own id generator draws them."""
    return getrandbits(nbytes * 8).to_bytes(nbytes, "big").hex()
