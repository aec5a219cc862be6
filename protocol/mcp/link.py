"""One MCP server's session in this worker: opened, watched, and opened again with backoff when it breaks.

Built on the ``mcp`` SDK's client (``Client`` over ``stdio_client`` or
``streamable_http_client``), which is AnyIO code and runs on Trio as it is.
A stdio server is a subprocess of this session: its exit ends the session
(its stdout reaches EOF), the SDK's transport reaps it, and the next one
starts after the backoff; stopping the session (a reload, the gateway's
end) closes its stdin, then terminates and kills it, bounded and shielded.

The read side of the transport is watched (``_Watched``): the end of the
server's messages, or a line that is not JSON-RPC (the framing can no
longer be trusted), ends the session at once, and every call still waiting
on it gets ``CONNECTION_CLOSED`` from the SDK, which ``call_tool`` turns
into a ``ToolFailure`` saying why. While the session is down, calls fail
at once instead of waiting for a restart that may be seconds away.

Headers forwarded for one call ride on that call's own POST: the SDK runs
each outbound message in a copy of its sender's context, so the request
hook of the session's HTTP client reads them from ``FORWARDED``, set by the
calling task alone.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from typing import Any, AsyncIterator, Mapping

import anyio
import httpx2
import mcp_types as types
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from switchyard.actors.mcp.port import INVALID, UNAVAILABLE, UPSTREAM_ERROR, ToolFailure, ToolResult
from switchyard.config.mcp_servers import McpServer

log = logging.getLogger("switchyard.mcp")

CONNECT_TIMEOUT = 30.0                 # to start a server and finish the handshake
INITIAL_BACKOFF, MAX_BACKOFF = 0.5, 30.0
STABLE_AFTER = 60.0                    # a session up this long starts the backoff over
MAX_PAGES = 50                         # of a tools/list
SSE_SLACK = 64 * 1024                  # an SSE event's framing beyond the result it carries
CLIENT_INFO = types.Implementation(name="switchyard", version="1")
FORWARDED: ContextVar[Mapping[str, str] | None] = ContextVar("switchyard_mcp_forwarded", default=None)

CONNECTING, UP, DOWN, STOPPED = "connecting", "up", "down", "stopped"


async def _forward(request: httpx2.Request) -> None:
    """The request hook: this call's forwarded headers (none outside a call) on its own POST."""
    for name, value in (FORWARDED.get() or {}).items():
        request.headers[name] = value


class _WatchedRead:
    """The transport's read stream, setting ``ended`` when the server's messages end."""

    def __init__(self, inner: Any, ended: trio.Event) -> None:
        self._inner, self._ended = inner, ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    def __aiter__(self) -> "_WatchedRead":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.EndOfStream, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def receive(self) -> Any:
        return await self.__anext__()

    async def __aenter__(self) -> "_WatchedRead":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        self._ended.set()
        await self._inner.aclose()


@asynccontextmanager
async def _watched(transport: Any, ended: trio.Event) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read, write):
        yield _WatchedRead(read, ended), write


class Link:
    """The session with one server; ``run`` keeps it open until cancelled."""

    def __init__(self, config: McpServer) -> None:
        self.config = config
        self.state = CONNECTING
        self.fault: str | None = None        # why the last session ended (or never opened)
        self.fault_kind = UNAVAILABLE
        self.retry_at: float | None = None   # when the next session is tried, while down
        self.restarts = 0                    # sessions ended, since start
        self._client: Client | None = None
        self._ended = trio.Event()
        self._changed = trio.Event()

    def _set(self, state: str) -> None:
        self.state = state
        self._changed.set()
        self._changed = trio.Event()

    async def run(self) -> None:
        backoff = INITIAL_BACKOFF
        try:
            while True:
                began = trio.current_time()
                self.fault, self.fault_kind = None, UNAVAILABLE
                self._set(CONNECTING)
                await self._session(began)
                self.restarts += 1
                if trio.current_time() - began >= STABLE_AFTER:
                    backoff = INITIAL_BACKOFF
                self.retry_at = trio.current_time() + backoff
                self._set(DOWN)
                log.warning("mcp server %s: %s; opening a new session in %gs", self.config.name,
                            self.fault, backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
        finally:
            self._client = None
            self.fault = "the server was stopped (removed from the config, or the gateway is stopping)"
            self._set(STOPPED)

    async def _session(self, began: float) -> None:
        ended = self._ended = trio.Event()
        try:
            with trio.CancelScope(deadline=began + CONNECT_TIMEOUT) as scope:
                async with self._open(ended) as client:
                    scope.deadline = math.inf
                    self._client = client
                    self._set(UP)
                    log.info("mcp server %s: session open (protocol %s)", self.config.name, client.protocol_version)
                    await ended.wait()
            if scope.cancelled_caught:
                self.fault = f"no session within {CONNECT_TIMEOUT:g}s (the server did not answer its handshake)"
        except Exception as exc:   # OSError (no such command), MCPError (handshake refused), httpx2's errors
            self.fault = self.fault or f"the session failed: {_described(exc)}"
        finally:
            self._client = None
        self.fault = self.fault or ("the server exited" if self.config.stdio else "the connection closed")

    @asynccontextmanager
    async def _open(self, ended: trio.Event) -> AsyncIterator[Client]:
        c = self.config
        async with AsyncExitStack() as stack:
            if c.stdio:
                assert c.command is not None
                params = StdioServerParameters(command=c.command, args=list(c.args), env=dict(c.env) or None)
                transport: Any = stdio_client(params, errlog=sys.stderr)
            else:
                assert c.url is not None
                http = create_mcp_http_client(headers=dict(c.headers) or None)
                http.event_hooks = {"request": [_forward], "response": []}
                await stack.enter_async_context(http)
                transport = streamable_http_client(c.url, http_client=http,
                                                   max_sse_event_size=c.max_result_bytes + SSE_SLACK)
            client = Client(_watched(transport, ended), mode="auto", cache=None, client_info=CLIENT_INFO,
                            message_handler=self._on_message)
            yield await stack.enter_async_context(client)

    async def _on_message(self, message: Any) -> None:
        """What the server sends unasked; a line that is not JSON-RPC ends the session (see the module)."""
        if isinstance(message, Exception):
            self.fault, self.fault_kind = f"the server sent what is not JSON-RPC ({_described(message)})", INVALID
            self._ended.set()

    async def _session_now(self) -> Client:
        while True:
            if self.state == UP and self._client is not None:
                return self._client
            if self.state in (DOWN, STOPPED):
                wait = "" if self.retry_at is None or self.state == STOPPED else \
                    f"; a new session is tried in {max(0.0, self.retry_at - trio.current_time()):.1f}s"
                raise ToolFailure(self.fault_kind if self.state == DOWN else UNAVAILABLE,
                                  f"the MCP server {self.config.name} is unavailable: {self.fault}{wait}")
            await self._changed.wait()

    async def list_tools(self) -> tuple[Mapping[str, Any], ...]:
        client = await self._session_now()
        tools: list[Mapping[str, Any]] = []
        cursor: str | None = None
        async with self._failures(client):
            for _ in range(MAX_PAGES):
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await client.session.send_request(types.ListToolsRequest(params=params), types.ListToolsResult)
                tools.extend(t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        return tuple(tools)

    async def call_tool(self, tool: str, arguments: Mapping[str, Any] | None,
                        forwarded: Mapping[str, str]) -> ToolResult:
        client = await self._session_now()
        request = types.CallToolRequest(params=types.CallToolRequestParams(
            name=tool, arguments=dict(arguments) if arguments is not None else None))
        token = FORWARDED.set(dict(forwarded)) if forwarded else None
        try:
            async with self._failures(client):
                result = await client.session.send_request(request, types.CallToolResult)
        finally:
            if token is not None:
                FORWARDED.reset(token)
        data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return ToolResult(data, len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()))

    @asynccontextmanager
    async def _failures(self, client: Client) -> AsyncIterator[None]:
        """The SDK's and the transport's failures as ``ToolFailure``s that say what happened."""
        try:
            yield
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                await trio.lowlevel.checkpoint()   # the session's end has been noted by now: say why
                why = self.fault or ("the server exited" if self.config.stdio else "the connection closed")
                raise ToolFailure(self.fault_kind, f"the MCP server {self.config.name} closed the session "
                                                   f"during the call: {why}") from None
            raise ToolFailure(UPSTREAM_ERROR, f"the MCP server {self.config.name} answered error {exc.code}: "
                                              f"{exc.message}") from None
        except (ValidationError, ValueError) as exc:
            raise ToolFailure(INVALID, f"the MCP server {self.config.name} answered what is not a valid MCP "
                                       f"result ({_described(exc)})") from None
        except (httpx2.HTTPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ToolFailure(UNAVAILABLE, f"the MCP server {self.config.name} could not be reached: "
                                           f"{_described(exc)}") from None


def _described(exc: BaseException) -> str:
    """An exception in one line, bounded (a server's words are not ours to repeat at length)."""
    text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]
