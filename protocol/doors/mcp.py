"""``/mcp``: the MCP servers behind the gateway as one Streamable HTTP MCP server, for a Switchyard key.

The ``mcp`` SDK's low-level ``Server`` answers, behind its
``StreamableHTTPSessionManager`` in stateless mode with JSON answers (both
AnyIO code, run on Trio as they are): each POST is one JSON-RPC exchange,
judged by the gate like any ``/v1`` call (the key, the body's limits, the
concurrency cap, the drain), and no session outlives its request, so every
request carries its own key and none can ride on another's. The protocol
revisions are the SDK's: the per-request 2026-07-28 form, and the
``initialize`` handshake of the earlier ones.

What a call may do and what it leaves behind is ``actors/mcp/calls.py``'s;
here the request becomes its ``Caller`` and a refusal becomes the JSON-RPC
error an MCP client expects (an unknown tool: ``-32602``, as the MCP
specification says; a rate limit: ``-32029`` with ``retry_after``). The SDK
(a second to import) is loaded with the first request to ``/mcp``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from switchyard.actors.mcp.calls import ToolRefused
from switchyard.actors.mcp.records import UNKNOWN_TOOL, Caller
from switchyard.protocol.http.asgi import Receive, Scope, Send

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.protocol.http.gate import Identity

PATH = "/mcp"
METHODS = ("POST", "GET", "DELETE")   # the SDK answers what stateless mode does with GET and DELETE
SCOPE_KEY = "switchyard.mcp"          # the request's (ToolCalls, Caller), for the SDK's handlers
INVALID_PARAMS = -32602
RATE_LIMITED = -32029                 # a server error code of the gateway's (JSON-RPC leaves -32000..-32099 free)
BODY_UNLIMITED = 1 << 40              # the body was read under server.max_body_bytes before the SDK sees it


def caller_of(runtime: "Runtime", who: "Identity") -> Caller:
    snapshot = runtime.snapshot
    client_ip = who.client_ip(snapshot.server.trusted_proxies) if snapshot.rate_limiting.per_client_ip else None
    headers: dict[str, str] = {}
    for name, value in who.headers:
        text, key = value.decode("latin-1"), name.decode("latin-1").lower()
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return Caller(who.request_id, who.key_now(snapshot), client_ip, who.trace, headers)


async def _list_tools(ctx: Any, params: Any) -> Any:
    import mcp_types as types

    calls, caller = ctx.request.scope[SCOPE_KEY]
    tools = await calls.list_tools(caller)
    # a private listing, stale at once (the SDK's defaults): each key sees its own, and it may change
    return types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in tools])


async def _call_tool(ctx: Any, params: Any) -> Any:
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    calls, caller = ctx.request.scope[SCOPE_KEY]
    try:
        return types.CallToolResult.model_validate(await calls.call_tool(caller, params.name, params.arguments))
    except ToolRefused as refused:
        if refused.code == UNKNOWN_TOOL:
            raise MCPError(INVALID_PARAMS, refused.message) from None
        data = {"retry_after": refused.retry_after} if refused.retry_after is not None else None
        raise MCPError(RATE_LIMITED, refused.message, data) from None


class McpDoor:
    """The SDK's server and session manager, started once in the App's lifespan nursery."""

    def __init__(self) -> None:
        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        server: Any = Server("switchyard", version="1", on_list_tools=_list_tools, on_call_tool=_call_tool)
        self.manager = StreamableHTTPSessionManager(server, stateless=True, json_response=True,
                                                    max_request_body_size=BODY_UNLIMITED)
        self.ready = trio.Event()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with self.manager.run():
            self.ready.set()
            task_status.started()
            await trio.sleep_forever()


class McpEndpoint:
    """What the App routes ``/mcp`` to: the door, made and started with the first request."""

    def __init__(self) -> None:
        self.door: McpDoor | None = None

    async def serve(self, nursery: trio.Nursery, runtime: "Runtime", who: "Identity", scope: Scope,
                    receive: Receive, send: Send, body: bytes) -> None:
        if self.door is None:
            self.door = McpDoor()
            await nursery.start(self.door.run)
        await self.door.ready.wait()
        scope = {**scope, SCOPE_KEY: (runtime.tool_calls, caller_of(runtime, who))}
        respond: Any = send   # the SDK's annotation asks for a MutableMapping message; ours are dicts
        await self.door.manager.handle_request(scope, _replayed(body, receive), respond)


def _replayed(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the SDK: the body the gate already read, then the client's own messages (its
    disconnect)."""
    given = False

    async def replay() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replay

