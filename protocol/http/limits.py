"""Built-in protection of the model-list routes, and who the client is.

Pure pieces, time passed in: the caller reads ``trio.current_time()`` once
and hands it down, so every rule here is a plain unit test and the app's
tests run at exact instants under a MockClock.

- Token buckets (``Rate``, ``Bucket``) and ``ClientRateLimiter``, which
  checks each client's two buckets, a short burst bucket and a long
  sustained one, and says which of them refused.
- The fixed limits: ``GET /v1/models`` (``MODELS_LIMIT``) and
  ``POST /v1/models/refresh`` (``REFRESH_LIMIT``). They are not
  configurable: the model list is always protected.
- Who is asking: ``client_ip`` (``X-Forwarded-For`` believed only from
  ``server.trusted_proxies``), ``models_client`` and ``refresh_client``.
  A client identity never holds key material: a bearer value is reduced to
  a short SHA-256 digest before it becomes a bucket key or a log field.
- ``ModelListCache``: the ``/v1/models`` body with its TTL, where an empty
  list is kept only briefly and backs off while it stays empty.

Every limiter and cache lives in one worker process: with ``server.workers:
N`` a client can get up to N times the limits below.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import math
from itertools import islice
from typing import Any, Generic, Iterable, TypeVar

import attrs
from attrs import frozen

# --- token buckets ----------------------------------------------------------


@frozen
class Rate:
    """``tokens`` requests per ``per`` seconds: a bucket of that size, refilled evenly over ``per``."""

    tokens: int
    per: float

    @property
    def refill(self) -> float:
        return self.tokens / self.per

    def describe(self) -> str:
        return f"{self.tokens} per minute" if self.per == 60 else f"{self.tokens} per {self.per:g}s"


@frozen
class Bucket:
    tokens: float
    updated: float


def full(rate: Rate, now: float) -> Bucket:
    return Bucket(float(rate.tokens), now)


def refilled(b: Bucket, rate: Rate, now: float) -> Bucket:
    elapsed = max(0.0, now - b.updated)
    return Bucket(min(float(rate.tokens), b.tokens + elapsed * rate.refill), max(now, b.updated))


def taken(b: Bucket) -> Bucket:
    return attrs.evolve(b, tokens=b.tokens - 1.0)


def wait(b: Bucket, rate: Rate) -> float:
    """Seconds until a refilled-to-now bucket holds one whole token (0: it does now)."""
    return 0.0 if b.tokens >= 1.0 else (1.0 - b.tokens) / rate.refill


def is_full(b: Bucket, rate: Rate, now: float) -> bool:
    return refilled(b, rate, now).tokens >= rate.tokens


@frozen
class Limit:
    """A burst bucket and a sustained bucket; a request needs a token from both."""

    route: str
    burst: Rate
    sustained: Rate


# GET /v1/models, per client: 60 per minute, at most 10 per 5 s. Fixed.
MODELS_LIMIT = Limit("GET /v1/models", burst=Rate(10, 5.0), sustained=Rate(60, 60.0))
# POST /v1/models/refresh: 12 per minute, at most 3 per 5 s. Fixed. Each
# refresh empties the cache and asks every backend for its models.
REFRESH_LIMIT = Limit("POST /v1/models/refresh", burst=Rate(3, 5.0), sustained=Rate(12, 60.0))


@frozen
class Rejection:
    which: str            # "burst" | "sustained": the bucket that refused (the longer wait if both)
    rate: Rate
    retry_after: float    # seconds until both buckets hold a token
    first: bool = True    # the first refusal since this client last got through (worth a log line)

    @property
    def retry_after_header(self) -> int:
        """Whole seconds, rounded up, at least 1: waiting that long is enough."""
        return max(1, math.ceil(self.retry_after - 1e-9))


MAX_CLIENTS = 10_000


class ClientRateLimiter:
    """Per-client pairs of buckets for one ``Limit``; bounded to ``max_clients`` identities.

    A refused request takes no token, so a client hammering while limited
    does not push its own retry time back. When the table is full, clients
    whose buckets have refilled completely are forgotten (they lose
    nothing), then the least recently seen until a tenth of the room is free.
    """

    def __init__(self, limit: Limit, max_clients: int = MAX_CLIENTS) -> None:
        self.limit = limit
        self.max_clients = max_clients
        self._clients: dict[str, tuple[Bucket, Bucket]] = {}
        self._refusing: set[str] = set()   # clients refused since their last admitted request

    def __len__(self) -> int:
        return len(self._clients)

    def check(self, client: str, now: float) -> Rejection | None:
        """None and one token taken from each bucket, or why not (nothing taken)."""
        lim = self.limit
        known = self._clients.pop(client, None)  # re-inserted below: dict order is recency
        if known is None:
            if len(self._clients) >= self.max_clients:
                self._make_room(now)
            burst, sustained = full(lim.burst, now), full(lim.sustained, now)
        else:
            burst, sustained = refilled(known[0], lim.burst, now), refilled(known[1], lim.sustained, now)
        wait_burst, wait_sustained = wait(burst, lim.burst), wait(sustained, lim.sustained)
        if wait_burst or wait_sustained:
            self._clients[client] = (burst, sustained)
            first = client not in self._refusing
            self._refusing.add(client)
            if wait_sustained >= wait_burst:
                return Rejection("sustained", lim.sustained, wait_sustained, first)
            return Rejection("burst", lim.burst, wait_burst, first)
        self._clients[client] = (taken(burst), taken(sustained))
        self._refusing.discard(client)
        return None

    def _make_room(self, now: float) -> None:
        lim = self.limit
        for key in [k for k, (b, s) in self._clients.items()
                    if is_full(b, lim.burst, now) and is_full(s, lim.sustained, now)]:
            del self._clients[key]
            self._refusing.discard(key)
        target = self.max_clients - max(1, self.max_clients // 10)
        excess = len(self._clients) - target
        if excess > 0:
            for key in list(islice(self._clients, excess)):
                del self._clients[key]
                self._refusing.discard(key)


# --- who is asking ------------------------------------------------------------

GLOBAL = "global"


def digest(secret: str) -> str:
    """A short, stable, one-way name for a credential: safe in bucket keys and logs."""
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def bearer(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The ``Authorization: Bearer`` credential, or None when absent, empty or another scheme."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, credential = value.partition(b" ")
            credential = credential.strip()
            if scheme.lower() == b"bearer" and credential:
                return credential.decode("latin-1")
            return None
    return None


def models_client(headers: Iterable[tuple[bytes, bytes]], ip: str) -> str:
    """``GET /v1/models``: the first 16 characters of the bearer value, else the client IP.

    With ``api_keys`` configured only a verified key gets this far; without
    them the bearer value is not checked, so a caller can mint identities by sending made-up keys; the limiter bounds
    how many it remembers, and the refresh route, the expensive one, does
    not trust this identity at all.
    """
    credential = bearer(headers)
    if credential:
        return "key#" + digest(credential[:16])
    return "ip " + ip


def refresh_client(verified_key: str | None) -> str:
    """``POST /v1/models/refresh``: a verified API key gets its own bucket; everyone else shares one.

    The app passes the verified key's id (``api_keys``); without keys it passes
    None and every caller shares the ``GLOBAL`` bucket: a forged header
    cannot buy a fresh quota.
    """
    if verified_key is None:
        return GLOBAL
    return "verified-key#" + digest(verified_key)


# --- client address -------------------------------------------------------------

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.lru_cache(maxsize=16)
def networks(cidrs: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


def parse_ip(text: str) -> Address | None:
    """An address as peers and proxies write it: bare, ``v4:port``, ``[v6]`` or ``[v6]:port``."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # a dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d
    return ip


def _trusted(ip: Address, trusted: tuple[Network, ...]) -> bool:
    return any(ip in net for net in trusted)


def forwarded_for(headers: Iterable[tuple[bytes, bytes]]) -> list[str]:
    """Every ``X-Forwarded-For`` entry, left to right, across repeated headers."""
    out: list[str] = []
    for name, value in headers:
        if name == b"x-forwarded-for":
            out.extend(p.strip() for p in value.decode("latin-1").split(","))
    return [p for p in out if p]


def client_ip(peer: Any, headers: Iterable[tuple[bytes, bytes]], trusted_proxies: tuple[str, ...]) -> str:
    """The address of the client (``peer``: the ASGI scope's ``client``), as far as it can be believed.

    The socket peer, unless it is a trusted proxy: then ``X-Forwarded-For``
    is walked from the right (each proxy appends the address it saw),
    skipping trusted proxies, and the first untrusted address is the
    client. Entries left of it were written by the client and are ignored.
    An entry that is not an address stops the walk at the last trusted hop
    (a proxy wrote nonsense; do not let it pick the identity). A peer with
    no address (a Unix socket, a test) is ``"unknown"``.
    """
    if not peer:
        return "unknown"
    peer_ip = parse_ip(str(peer[0]))
    if peer_ip is None:
        return str(peer[0])
    trusted = networks(tuple(trusted_proxies))
    if not trusted or not _trusted(peer_ip, trusted):
        return str(peer_ip)
    hop = peer_ip
    for entry in reversed(forwarded_for(headers)):
        ip = parse_ip(entry)
        if ip is None:
            return str(hop)
        if not _trusted(ip, trusted):
            return str(ip)
        hop = ip
    return str(hop)  # every hop trusted: the leftmost is as far back as anyone can see


# --- /v1/models cache -------------------------------------------------------------

MODELS_TTL = 30.0          # a non-empty model list
EMPTY_TTL_FIRST = 5.0      # an empty one, the first time in a row
EMPTY_TTL_MAX = 60.0       # doubling per consecutive empty result, up to this


def empty_ttl(streak: int) -> float:
    """TTL of the ``streak``-th empty list in a row (1-based): 5, 10, 20, 40, 60, 60, ... seconds."""
    return min(EMPTY_TTL_FIRST * 2.0 ** (streak - 1), EMPTY_TTL_MAX)


B = TypeVar("B")


class ModelListCache(Generic[B]):
    """The model list (whatever the app keeps: the rows and their rendered ``/v1/models``
    body), for one Snapshot, until its TTL passes.

    An empty list (every backend down or still starting) is kept only
    briefly so the models reappear soon after the backends do, and backs
    off while it stays empty so a long outage does not recompute on every
    call. ``clear`` (the refresh route) drops the body; the empty streak
    stays, so a refresh that still finds nothing keeps backing off. A new
    Snapshot (a reload) starts over.
    """

    def __init__(self) -> None:
        self.body: B | None = None
        self.expires = 0.0
        self.empty_streak = 0
        self._owner: object = None

    def get(self, owner: object, now: float) -> B | None:
        if self.body is not None and owner is self._owner and now < self.expires:
            return self.body
        return None

    def put(self, owner: object, body: B, empty: bool, now: float) -> float:
        """Keep ``body``; returns its TTL."""
        if owner is not self._owner:
            self._owner, self.empty_streak = owner, 0
        if empty:
            self.empty_streak += 1
            ttl = empty_ttl(self.empty_streak)
        else:
            self.empty_streak = 0
            ttl = MODELS_TTL
        self.body, self.expires = body, now + ttl
        return ttl

    def clear(self) -> None:
        self.body = None
