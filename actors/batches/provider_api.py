"""Requests to an OpenAI or Azure backend's Files and Batch API, for the batch relay (``relay.py``).

Sent through the one shared upstream client, as every call is, with the
backend's own credentials (its kind's auth header: ``Authorization: Bearer``
on OpenAI, ``api-key`` on Azure). The client sets no read or write limit,
so each request runs under a deadline of its own: ``JSON_TIMEOUT`` for a
batch or file object, ``FILE_TIMEOUT`` for a file's bytes. A provider's
error answer (any status from 300) is raised as the ``UpstreamStatusError``
a call relays, its status, body and ``retry-after`` as the provider sent
them; a transport failure as the taxonomy's upstream errors.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Mapping

import httpx
import trio

from switchyard.actors.addressing import api_url, auth_headers
from switchyard.actors.bodies import ResponseTooLarge, whole_body
from switchyard.actors.errors import GatewayError, UpstreamProtocolError, UpstreamStatusError, UpstreamTimeout
from switchyard.actors.json_read import loads
from switchyard.config.schema import BackendConfig

log = logging.getLogger("switchyard.batches")

JSON_TIMEOUT = 60.0             # seconds for a request about a batch or a file
FILE_TIMEOUT = 900.0            # ... and for a file's bytes, up or down
ERROR_LIMIT = 1024 * 1024       # bytes of a provider's error answer passed on
JSON_LIMIT = 16 * 1024 * 1024   # bytes of a batch or file object


class ProviderApi:
    def __init__(self, upstream: Any) -> None:   # ports.Upstream (ports imports this package: not back)
        self.upstream = upstream

    async def json(self, backend: BackendConfig, method: str, path: str, content: bytes = b"",
                   content_type: str | None = None, timeout: float = JSON_TIMEOUT) -> Mapping[str, Any]:
        """A request's 2xx answer, a JSON object (anything else: the backend's protocol failure)."""
        async with self.exchange(backend, method, path, content, content_type, timeout) as response:
            try:
                body = await whole_body(response, JSON_LIMIT)
            except ResponseTooLarge:
                body = b""
        try:
            payload = loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise UpstreamProtocolError(f"Backend '{backend.name}' answered {method} {path} with no JSON object",
                                        backend=backend.name)
        return payload

    @asynccontextmanager
    async def exchange(self, backend: BackendConfig, method: str, path: str, content: bytes = b"",
                       content_type: str | None = None, timeout: float = JSON_TIMEOUT
                       ) -> AsyncIterator[httpx.Response]:
        """A request to ``backend``, its 2xx answer open for the block, the whole under ``timeout`` seconds."""
        headers = [*((("content-type", content_type),) if content_type else ()), *auth_headers(backend)]
        request = self.upstream.request(method, api_url(backend.url, path), headers, content)
        with trio.move_on_after(timeout) as scope, self.upstream.errors(backend.name):
            response = await self.upstream.send(request)
            try:
                if response.status_code >= 300:
                    raise await _refusal(backend.name, response)
                yield response
            finally:
                await response.aclose()
        if scope.cancelled_caught:
            raise UpstreamTimeout(f"Backend '{backend.name}' did not finish {method} {path} within {timeout:g}s",
                                  backend=backend.name, details={"timeout": "batch"})

    async def forget(self, backend: BackendConfig, path: str) -> None:
        """``DELETE path`` (a file the provider holds), best effort: a failure is logged, never raised."""
        try:
            async with self.exchange(backend, "DELETE", path):
                pass
        except GatewayError as exc:
            log.warning("could not delete %s at backend %s: %s", path, backend.name, exc.message)


async def _refusal(backend: str, response: httpx.Response) -> UpstreamStatusError:
    """A provider's error answer, to pass on as it came (a redirect too: the backend's url is wrong)."""
    try:
        body = await whole_body(response, ERROR_LIMIT)
    except ResponseTooLarge:
        body = b""
    return UpstreamStatusError(backend, response.status_code, body,
                               response.headers.get("content-type", "").encode(), response.headers.get("retry-after"))
