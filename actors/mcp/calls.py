"""One caller's view of the MCP servers: the tools it may list, and each tool call, judged and accounted.

Every door that runs a tool for a client goes through ``ToolCalls``: ``/mcp``,
and the tool loop of a chat or Responses call (``toolbox.py``) under the
call's key. A call is judged (the tool exists and the key and its organization allow it: else
``ToolRefused``, which the door answers as the JSON-RPC error an MCP client
expects), admitted by the key's rate limits (a request that spends no
tokens), run under its server's ``timeout`` (and the deadline of the call it
is made for: a chat call's budget), and its result held to
``max_result_bytes``. A call that got no usable result answers a tool error
(``isError: true``, its reason in words), so a client or a model reads what
went wrong. Whatever happened, one ledger record (``purpose: mcp``; never the
arguments or the result) and one ``ToolCall`` for the metrics and the span:
a call cancelled from outside (its client left) is recorded as it unwinds,
since the record is a tell.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable, Mapping, Protocol

import trio

from switchyard.actors.ledger.record import LedgerRecord
from switchyard.actors.limits.tickets import Admission, Demand, Ticket
from switchyard.actors.mcp.port import ToolFailure, ToolServers
from switchyard.actors.mcp.records import (
    CLIENT_LEFT,
    OK,
    RATE_LIMITED,
    TIMEOUT,
    TOO_LARGE,
    TOOL_ERROR,
    UNKNOWN_TOOL,
    Caller,
    ToolCall,
    ledger_record,
)
from switchyard.actors.routing.limits import scopes_for
from switchyard.actors.routing.mcp_tools import allows, public_name, reaches_server, split_name
from switchyard.actors.trace import new_span_id
from switchyard.config.access import ApiKey
from switchyard.config.limits import Organization
from switchyard.config.mcp_servers import McpServer
from switchyard.config.schema import Snapshot

log = logging.getLogger("switchyard.mcp")

class Admits(Protocol):
    """The limiter, as much of it as a tool call asks (``actors/ports.py``'s ``Limiter``)."""

    async def admit(self, demand: Demand) -> Admission: ...

    def settle(self, ticket: Ticket, tokens_used: int, cost_usd: float | None) -> None: ...


class ToolRefused(Exception):
    """A call refused before it reached a server: ``code`` (``unknown_tool``, ``rate_limited``), ``status``
    for the ledger, ``retry_after`` seconds when waiting helps."""

    def __init__(self, code: str, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.retry_after = code, message, status, retry_after


def tool_error(message: str) -> dict[str, Any]:
    """A tool result that says the call failed, in words (MCP's tool execution error)."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


class ToolCalls:
    def __init__(self, servers: ToolServers | None, current: Callable[[], Snapshot],
                 organizations: Callable[[Snapshot], Mapping[str, Organization]], limiter: Admits,
                 record: Callable[[LedgerRecord], None]) -> None:
        self.servers = servers
        self._current = current
        self._organizations = organizations
        self._limiter = limiter
        self._record = record
        self.listeners: list[Callable[[ToolCall], None]] = []   # the metrics, the span export

    def _organization(self, snapshot: Snapshot, key: ApiKey | None) -> Organization | None:
        if key is None or key.organization_id is None:
            return None
        return self._organizations(snapshot).get(key.organization_id)

    async def list_tools(self, caller: Caller, deadline: float = math.inf,
                         only: frozenset[str] | None = None) -> list[dict[str, Any]]:
        """Every tool the caller may call, under its public name, server by server in config order (``only``:
        of those servers alone: a chat call asks only the servers it names). A server that cannot list its
        tools now (down, slow past its timeout or ``deadline``, the caller's own: a chat call's budget) is
        left out and logged."""
        snapshot = self._current()
        org = self._organization(snapshot, caller.key)
        reachable = [s for s in snapshot.mcp_servers if reaches_server(caller.key, org, s.name)
                     and (only is None or s.name in only)]
        listings: dict[str, tuple[Mapping[str, Any], ...]] = {}

        async def one(server: McpServer) -> None:
            assert self.servers is not None
            timeout = trio.current_time() + server.timeout
            with trio.move_on_at(min(timeout, deadline)):
                try:
                    listings[server.name] = await self.servers.list_tools(server.name)
                except ToolFailure as exc:
                    log.warning("mcp server %s: tools/list failed: %s", server.name, exc.message)
                return
            if timeout <= deadline:
                log.warning("mcp server %s: tools/list took longer than its timeout (%gs)", server.name,
                            server.timeout)
            else:
                log.warning("mcp server %s: tools/list cut by the time budget of request %s", server.name,
                            caller.request_id)

        if self.servers is not None:
            async with trio.open_nursery() as nursery:
                for server in reachable:
                    nursery.start_soon(one, server)
        out = []
        for server in reachable:
            for tool in listings.get(server.name, ()):
                name = tool.get("name")
                if isinstance(name, str) and allows(caller.key, org, server.name, name):
                    out.append({**tool, "name": public_name(server.name, name)})
        return out

    async def call_tool(self, caller: Caller, name: str, arguments: Mapping[str, Any] | None,
                        deadline: float = math.inf) -> dict[str, Any]:
        """The result of tool ``name`` (its public name): the upstream's, or a tool error saying why there is
        none; ``deadline``: the caller's own (a chat call's budget), besides the server's ``timeout``.
        Raises ``ToolRefused`` for a tool the caller cannot reach or a rate limit."""
        snapshot = self._current()
        started, wall = trio.current_time(), time.time()
        org = self._organization(snapshot, caller.key)
        servers = {s.name: s for s in snapshot.mcp_servers}
        split = split_name(name, servers)
        if split is None or self.servers is None or not allows(caller.key, org, *split):
            raise self.refuse(caller, name, wall)
        server, tool = servers[split[0]], split[1]
        try:
            ticket = await self._admit(caller, snapshot, server, tool, wall, started)
            outcome, message, result = await self._run(caller, server, tool, name, arguments, deadline, ticket)
        except trio.Cancelled:   # cut from outside (the client left): recorded all the same, without waiting
            self._finish(caller, server.name, tool, CLIENT_LEFT, wall, trio.current_time() - started)
            raise
        self._finish(caller, server.name, tool, outcome, wall, trio.current_time() - started)
        if result is None:
            assert message is not None
            return tool_error(message)
        return dict(result)

    async def _run(self, caller: Caller, server: McpServer, tool: str, name: str,
                   arguments: Mapping[str, Any] | None, deadline: float,
                   ticket: Ticket | None) -> tuple[str, str | None, Mapping[str, Any] | None]:
        """(outcome, the reason in words when there is no result, the result) of an admitted call."""
        assert self.servers is not None
        outcome, message = OK, None
        result: Mapping[str, Any] | None = None
        timeout = trio.current_time() + server.timeout
        try:
            with trio.move_on_at(min(timeout, deadline)) as scope:
                answer = await self.servers.call_tool(server.name, tool, arguments, _forwarded(server, caller))
                if answer.size > server.max_result_bytes:
                    outcome, message = TOO_LARGE, (f"The result of {name} is {answer.size} bytes, more than this "
                                                   f"server's max_result_bytes ({server.max_result_bytes}); "
                                                   f"ask for less")
                else:
                    result = answer.data
                    outcome = TOOL_ERROR if answer.data.get("isError") is True else OK
            if scope.cancelled_caught:
                outcome = TIMEOUT
                message = f"{name} did not answer within {server.timeout:g}s (its server's timeout)" \
                    if timeout <= deadline else f"{name} did not finish within the call's time budget"
        except ToolFailure as exc:
            outcome, message = exc.kind, f"{name} failed: {exc.message}"
        finally:
            if ticket is not None:
                self._limiter.settle(ticket, 0, None)
        return outcome, message, result

    def refuse(self, caller: Caller, name: str, wall: float | None = None) -> ToolRefused:
        """A call of a tool the caller may not reach, or that does not exist (one answer for both: the list
        is the caller's): its ledger record, and the refusal to raise or to answer with."""
        self._record(ledger_record(caller, None, name, UNKNOWN_TOOL, time.time() if wall is None else wall, 0.0))
        return ToolRefused(UNKNOWN_TOOL, f"Unknown tool: {name}", 404)

    async def _admit(self, caller: Caller, snapshot: Snapshot, server: McpServer, tool: str, wall: float,
                     started: float) -> Ticket | None:
        """The key's rate limits (and the global and per-address ones) for one request that spends no
        tokens; raises the refusal. Budgets are not drawn on: a tool call has no price."""
        scopes = scopes_for(snapshot.rate_limiting, self._organizations(snapshot), caller.key, caller.client_ip,
                            None)
        if not scopes:
            return None
        admission = await self._limiter.admit(Demand(caller.request_id, scopes, 0, ()))
        if admission.refusal is None:
            return admission.ticket
        refusal = admission.refusal
        self._finish(caller, server.name, tool, RATE_LIMITED, wall, trio.current_time() - started)
        raise ToolRefused(RATE_LIMITED, refusal.message, 429, refusal.retry_after)

    def _finish(self, caller: Caller, server: str, tool: str, outcome: str, wall: float, seconds: float) -> None:
        call = ToolCall(caller.request_id, server, tool, outcome, wall, seconds,
                        caller.key.id if caller.key is not None else None, caller.trace,
                        new_span_id() if caller.trace is not None else None, caller.parent_span_id)
        self._record(ledger_record(caller, server, public_name(server, tool), outcome, wall, seconds))
        for listener in self.listeners:
            try:
                listener(call)
            except Exception:   # a metric or a span never fails a call
                log.exception("a tool call listener failed")


def _forwarded(server: McpServer, caller: Caller) -> dict[str, str]:
    return {name: caller.headers[name] for name in server.forward_headers if name in caller.headers}
