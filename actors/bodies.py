"""Reading a backend's answer body: chunk by chunk as it arrives, or whole under a size limit."""

from __future__ import annotations

from collections.abc import AsyncIterable

import httpx


def body_chunks(response: httpx.Response) -> AsyncIterable[bytes]:
    """A response body's chunks as they arrive, for a caller that closes ``response`` itself.

    Without a ``content-encoding`` the bytes need no decoding, so they come
    straight from the transport's stream: httpx's ``aiter_bytes`` would add
    two async generators, two context-manager generators, two chunkers and a
    decoder, kept for the whole life of the stream (about 1.6 KB per open
    stream). A compressed body still goes through ``aiter_bytes``. httpx
    errors surface the same either way.
    """
    if "content-encoding" in response.headers:
        return response.aiter_bytes()
    return response.stream   # type: ignore[return-value]   # an AsyncByteStream: iterable once


class ResponseTooLarge(Exception):
    """A response body went past the reader's limit; what was read so far is dropped."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the response body exceeds {limit} bytes")
        self.limit = limit


async def whole_body(response: httpx.Response, limit: int) -> bytes:
    """A response body read to its end, at most ``limit`` bytes (``ResponseTooLarge`` past it),
    for a caller that closes ``response`` itself.

    Like ``response.aread()`` but read straight from the transport's stream
    when unencoded (``body_chunks``' reasons). The body is not kept on the
    response: the pool's streams raise ``httpx.StreamConsumed`` on a second
    read. A compressed body is limited by its decoded size.
    """
    parts: list[bytes] = []
    size = 0
    async for part in body_chunks(response):
        size += len(part)
        if size > limit:
            raise ResponseTooLarge(limit)
        parts.append(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)
