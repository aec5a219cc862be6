"""The hop count: how many Switchyard gateways a request has passed through before this one.

A backend URL that points back at the gateway, or two gateways that list
each other, would pass one request round until every timeout ran out. So
every request a gateway sends upstream carries ``x-continuum-hops: N``, N
being one more than the count it arrived with (a decimal, ``0``-``999``;
absent means 0: straight from a client). The hop guard reads it before
the API routes: past ``server.max_hops`` the request is refused with 508
Loop Detected, and a value that is not such a count with 400 naming the
header, because a gateway that cannot count hops cannot stop a loop.
"""

from __future__ import annotations

from typing import Iterable

from switchyard.actors.errors import InvalidRequest, LoopDetected

HEADER = "x-continuum-hops"
_HEADER = HEADER.encode()
MAX_DIGITS = 3   # 0-999: far past any max_hops, and short enough to read without a bound check
FIRST = (HEADER, "1")   # a request that did not come from a client call (health, discovery, the classifier)


def inbound_hops(headers: Iterable[tuple[bytes, bytes]], max_hops: int) -> int:
    """The hop count a request arrived with (0 when it carries none), or the guard's refusal."""
    value: bytes | None = None
    for name, raw in headers:
        if name == _HEADER:   # ASGI servers hand header names over lowercased
            if value is not None:
                raise InvalidRequest(f"The {HEADER} header is sent more than once; send one decimal hop count",
                                     param=HEADER, code="invalid_hop_count")
            value = raw
    if value is None:
        return 0
    if not (0 < len(value) <= MAX_DIGITS and value.isdigit()):   # bytes: ASCII digits only
        shown = value[:20].decode("latin-1")
        raise InvalidRequest(f"The {HEADER} header must be a decimal hop count of at most {MAX_DIGITS} digits, "
                             f"got {shown!r}", param=HEADER, code="invalid_hop_count")
    hops = int(value)
    if hops > max_hops:
        raise LoopDetected(
            f"This request has already passed {hops} gateways ({HEADER}), more than this gateway's "
            f"server.max_hops of {max_hops}: a backend URL probably points back at a gateway on its path",
            param=HEADER, details={"hops": hops, "max_hops": max_hops})
    return hops


def outbound(hops: int) -> tuple[str, str]:
    """The header an upstream request of a call that arrived with ``hops`` carries."""
    return HEADER, str(hops + 1)
