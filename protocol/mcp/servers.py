"""The configured MCP servers of one worker (the actors' ``ToolServers`` port): one ``Link`` each.

An actor started by the Runtime's supervisor: each link runs in a cancel
scope of its own inside the actor's nursery, so a reload stops a removed
or changed server (its session closed, a stdio subprocess stopped) and
starts the new ones without touching the rest, and the gateway's end stops
them all. The SDK is imported with the first server started, not before.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Mapping

import trio

from switchyard.actors.mcp.port import UNAVAILABLE, ToolFailure, ToolResult
from switchyard.config.mcp_servers import McpServer
from switchyard.config.schema import Snapshot

if TYPE_CHECKING:
    from switchyard.protocol.mcp.link import Link

log = logging.getLogger("switchyard.mcp")


class McpServers:
    name = "mcp_servers"

    def __init__(self, snapshot: Snapshot) -> None:
        self._configs: dict[str, McpServer] = {s.name: s for s in snapshot.mcp_servers}
        self.links: dict[str, tuple[Link, trio.CancelScope]] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for config in self._configs.values():
                self._start(config)
            task_status.started()
            await trio.sleep_forever()

    def _start(self, config: McpServer) -> None:
        # the mcp SDK takes about a second to import: only a gateway with a server pays it
        from switchyard.protocol.mcp.link import Link

        assert self._nursery is not None
        link, scope = Link(config), trio.CancelScope()
        self.links[config.name] = (link, scope)

        async def run() -> None:
            with scope:
                await link.run()
        self._nursery.start_soon(run, name=f"mcp_server {config.name}")

    def reconfigure(self, snapshot: Snapshot) -> None:
        configs = {s.name: s for s in snapshot.mcp_servers}
        if configs == self._configs:
            return
        for name, (link, scope) in list(self.links.items()):
            if configs.get(name) != link.config:
                scope.cancel()
                del self.links[name]
                log.info("mcp server %s: stopped (the config changed)", name)
        self._configs = configs
        if self._nursery is not None:
            for name, config in configs.items():
                if name not in self.links:
                    self._start(config)

    def _link(self, server: str) -> Link:
        found = self.links.get(server)
        if found is None:
            raise ToolFailure(UNAVAILABLE, f"the MCP server {server} is not running")
        return found[0]

    async def list_tools(self, server: str) -> tuple[Mapping[str, Any], ...]:
        return await self._link(server).list_tools()

    async def call_tool(self, server: str, tool: str, arguments: Mapping[str, Any] | None,
                        forwarded: Mapping[str, str]) -> ToolResult:
        return await self._link(server).call_tool(tool, arguments, forwarded)
