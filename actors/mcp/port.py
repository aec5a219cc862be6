"""What the actors need of the MCP servers (``protocol/mcp`` implements it) and what a call gives back.

A tool's result is the upstream's ``CallToolResult`` as JSON, untouched, with
its size; a call that got no result raises ``ToolFailure`` with its kind.
The timeout is the caller's (a cancel scope around ``call_tool``); the port
gives up on its own only when there is nothing to wait for (a server
restarting after a crash, a connection that closed under the call).
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

from attrs import frozen

from switchyard.config.schema import Snapshot

# ToolFailure.kind: why a call got no result (a ledger error code, a metric outcome)
UNAVAILABLE = "unavailable"   # the server is down, restarting, or the connection closed under the call
INVALID = "invalid"           # the server answered what is not a valid MCP result (or not JSON-RPC at all)
UPSTREAM_ERROR = "upstream_error"   # the server answered a JSON-RPC error
KINDS = (UNAVAILABLE, INVALID, UPSTREAM_ERROR)


class ToolFailure(Exception):
    """A tool call that got no result; ``message`` says why in words a client (or a model) can act on."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@frozen
class ToolResult:
    data: Mapping[str, Any]    # the CallToolResult as JSON (content, structuredContent, isError, ...)
    size: int                  # bytes of that JSON


class ToolServers(Protocol):
    """The configured MCP servers, one live session each (per worker)."""

    async def list_tools(self, server: str) -> tuple[Mapping[str, Any], ...]:
        """The server's tools as JSON (``Tool`` objects, their names as the server knows them)."""
        ...

    async def call_tool(self, server: str, tool: str, arguments: Mapping[str, Any] | None,
                        forwarded: Mapping[str, str]) -> ToolResult:
        """One ``tools/call``; ``forwarded``: the headers sent with this call alone (Streamable HTTP)."""
        ...

    def reconfigure(self, snapshot: Snapshot) -> None:
        """A reload: servers added are started, removed ones stopped, changed ones restarted."""
        ...
