"""AWS Signature Version 4 over a request's final bytes (header signing), as AWS documents it.

Pure: the time is an argument, nothing is read or fetched. ``sign`` returns
the headers to add (``x-amz-date``, ``x-amz-security-token`` with temporary
credentials, ``authorization``); the headers it is given (the caller picks
them among those sent, ``host`` at least) are signed with them, over the
body's SHA-256. The
canonical request follows the rules of every service but S3: each path
segment is URI-encoded once more as sent (a ``%3A`` in a Bedrock model id
is signed as ``%253A``), dot segments and repeated slashes are removed
(``normalize``), query parameters are sorted by encoded name then value,
header values are trimmed with inner runs of spaces folded into one.
Checked against AWS's published signature test suite (tests/data/aws_sigv4).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import posixpath
from typing import Iterable
from urllib.parse import quote, unquote

import attrs
from attrs import frozen

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED = frozenset({"authorization", "user-agent", "expect", "x-amzn-trace-id"})


@frozen
class Credentials:
    access_key: str
    secret_key: str = attrs.field(repr=False)
    token: str | None = attrs.field(default=None, repr=False)
    expires: float | None = None   # a Unix time; None: long-term credentials


def _encode(text: str) -> str:
    return quote(text, safe="-_.~")


def canonical_path(path: str, normalize: bool = True) -> str:
    """The path as sent, each segment URI-encoded once more; dot segments and empty ones removed."""
    if normalize:
        trailing = path.endswith("/") and path != "/"
        path = posixpath.normpath("/" + path.lstrip("/")) if path else "/"
        path = "/" + "/".join(p for p in path.split("/") if p)
        if trailing and path != "/":
            path += "/"
    return quote(path or "/", safe="/-_.~")


def canonical_query(query: str) -> str:
    pairs = []
    for part in query.split("&") if query else ():
        name, _, value = part.partition("=")
        pairs.append((_encode(unquote(name)), _encode(unquote(value))))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def _fold(value: str) -> str:
    return " ".join(value.split())


def canonical_headers(headers: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """(the canonical headers block, the signed header names): names lowercased and sorted, the
    values of a repeated name joined with commas in the order they came."""
    merged: dict[str, list[str]] = {}
    for name, value in headers:
        low = name.lower()
        if low not in UNSIGNED:
            merged.setdefault(low, []).append(_fold(value))
    names = sorted(merged)
    return "".join(f"{n}:{','.join(merged[n])}\n" for n in names), ";".join(names)


def _key(secret: str, day: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def string_to_sign(canonical_request: str, stamp: str, scope: str) -> str:
    return "\n".join((ALGORITHM, stamp, scope, hashlib.sha256(canonical_request.encode()).hexdigest()))


def sign(method: str, path: str, query: str, headers: Iterable[tuple[str, str]], body: bytes,
         credentials: Credentials, region: str, service: str, now: datetime.datetime,
         normalize: bool = True, sign_body: bool = False, sign_token: bool = True) -> list[tuple[str, str]]:
    """The headers that sign this request: ``headers`` must hold ``host`` and every other header sent.
    ``sign_body`` adds ``x-amz-content-sha256``; ``sign_token`` False adds the session token unsigned."""
    stamp = now.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    added = [("x-amz-date", stamp)]
    if sign_body:
        added.append(("x-amz-content-sha256", hashlib.sha256(body).hexdigest()))
    if credentials.token and sign_token:
        added.append(("x-amz-security-token", credentials.token))
    all_headers = [*headers, *added]
    request = canonical_request(method, path, query, all_headers, body, normalize)
    signed = canonical_headers(all_headers)[1]
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    signature = hmac.new(_key(credentials.secret_key, stamp[:8], region, service),
                         string_to_sign(request, stamp, scope).encode(), hashlib.sha256).hexdigest()
    added.append(("authorization", f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
                                   f"SignedHeaders={signed}, Signature={signature}"))
    if credentials.token and not sign_token:
        added.append(("x-amz-security-token", credentials.token))
    return added


def canonical_request(method: str, path: str, query: str, headers: Iterable[tuple[str, str]], body: bytes,
                      normalize: bool = True) -> str:
    """The canonical request of a request whose headers already include its ``x-amz-*`` ones."""
    block, signed = canonical_headers(headers)
    return "\n".join((method.upper(), canonical_path(path, normalize), canonical_query(query), block, signed,
                      hashlib.sha256(body).hexdigest()))
