"""The MCP tools a chat or Responses call names (``entries.py``), as a toolbox of the gateway's tool loop.

The model is offered the tools the caller may reach (``ToolCalls.list_tools``:
the key's and its organization's allowlists) that the call's entries allow
(``allowed_tools``, ``read_only``), each as a function tool named
``<server>__<tool>`` with the tool's input schema as its parameters. Each
call the model makes goes through ``ToolCalls.call_tool`` under the call's
own key and request id: the same allowlists, rate limits, timeout, result
cap, ledger record, metrics and span as at ``/mcp``. A call of a tool that
was not offered is refused without reaching a server (one ``unknown_tool``
record); a failure of any kind is a result that says so, never the call's
end. A Responses answer gets OpenAI's ``mcp_list_tools`` and ``mcp_call``
items before its own output; a chat answer is the final message alone.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

import trio
from attrs import frozen

from switchyard.actors.budgets import CallBudget
from switchyard.actors.mcp.calls import ToolCalls, ToolRefused
from switchyard.actors.mcp.entries import McpUse
from switchyard.actors.mcp.records import Caller
from switchyard.actors.routing.mcp_tools import split_name
from switchyard.actors.toolloop.loop import Function, ToolCall
from switchyard.config.mcp_servers import SEPARATOR


@frozen
class Ran:
    """One tool call of the loop, for the answer's ``mcp_call`` item and the call's route event."""

    call: ToolCall
    server: str
    tool: str                 # its name on the server
    output: str | None
    error: str | None


class McpTools:
    label = "an MCP tool the gateway runs on this call (<server>__<tool> of a server its tools name)"

    def __init__(self, calls: ToolCalls, caller: Caller, uses: Sequence[McpUse], listed: Sequence[Mapping[str, Any]],
                 max_calls: int, client_tools: Any, responses: bool, ran: Callable[[Ran], None]) -> None:
        self.calls, self.caller, self.uses, self.max_calls = calls, caller, uses, max_calls
        self.client_tools, self.responses, self.on_ran = client_tools, responses, ran
        servers = [u.server for u in uses]
        self.servers = frozenset(servers)
        self.listed: dict[str, Mapping[str, Any]] = {}   # public name -> the tool as listed (its server's name)
        for tool in listed:
            split = split_name(str(tool.get("name")), self.servers)
            if split is not None and next(u for u in uses if u.server == split[0]).admits({**tool, "name": split[1]}):
                self.listed[tool["name"]] = tool
        self.ran: list[Ran] = []

    @classmethod
    async def open(cls, calls: ToolCalls, caller: Caller, uses: Sequence[McpUse], max_calls: int,
                   client_tools: Any, responses: bool, ran: Callable[[Ran], None], budget: CallBudget) -> "McpTools":
        """The toolbox, with what the caller may reach of the named servers listed now (a server that
        cannot list its tools within its timeout and the call's budget offers none: ``ToolCalls.list_tools``)."""
        named = frozenset(u.server for u in uses)   # never waits on a server the call does not name
        listed = [t for t in await calls.list_tools(caller, budget.deadline, only=named)
                  if split_name(str(t.get("name")), set(named)) is not None]
        return cls(calls, caller, uses, listed, max_calls, client_tools, responses, ran)

    def offered(self) -> Sequence[Function]:
        out = []
        for name, tool in self.listed.items():
            server = name.partition(SEPARATOR)[0]
            about = next(u.description for u in self.uses if u.server == server)
            given = tool.get("description")
            text = given if isinstance(given, str) else ""
            schema = tool.get("inputSchema")
            out.append(Function(name, f"{about}\n\n{text}".strip() if about else text,
                                schema if isinstance(schema, Mapping) else {"type": "object", "properties": {}}))
        return out

    def owns(self, name: str) -> bool:
        return split_name(name, self.servers) is not None

    async def run(self, calls: list[ToolCall], budget: CallBudget) -> list[str]:
        results: list[Ran | None] = [None] * len(calls)

        async def one(i: int, call: ToolCall) -> None:
            results[i] = await self._one(call, budget)

        async with trio.open_nursery() as nursery:
            for i, call in enumerate(calls):
                if i < self.max_calls:
                    nursery.start_soon(one, i, call)
                else:
                    server, _, tool = call.name.partition(SEPARATOR)
                    results[i] = Ran(call, server, tool, None, f"{call.name} not run: at most {self.max_calls} "
                                                               f"MCP tool calls are run in one round")
        out = []
        for done in results:
            assert done is not None
            self.ran.append(done)
            self.on_ran(done)
            out.append(done.output if done.output is not None else f"The tool call failed: {done.error}")
        return out

    async def _one(self, call: ToolCall, budget: CallBudget) -> Ran:
        server, _, tool = call.name.partition(SEPARATOR)
        if call.name not in self.listed:   # never offered: not allowed to the key, or not by the call's entry
            return Ran(call, server, tool, None, self.calls.refuse(self.caller, call.name).message)
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            return Ran(call, server, tool, None, f"{call.name} not run: its arguments are not a JSON object")
        try:   # the call's budget bounds it too: a call cut there is a tool error (and its ledger record)
            result = await self.calls.call_tool(self.caller, call.name, arguments, budget.deadline)
        except ToolRefused as refused:
            return Ran(call, server, tool, None, f"{call.name} not run: {refused.message}")
        text = _text(result)
        failed = result.get("isError") is True
        return Ran(call, server, tool, None if failed else text, text if failed else None)

    def finish(self, answer: dict[str, Any]) -> dict[str, Any]:
        if not self.responses or not isinstance(answer.get("output"), list):
            return answer
        listings = [{"type": "mcp_list_tools", "id": f"mcpl_{i}_{use.server}", "server_label": use.server,
                     "tools": [_listed(name, tool) for name, tool in self.listed.items()
                               if name.partition(SEPARATOR)[0] == use.server]} for i, use in enumerate(self.uses)]
        items = [{"type": "mcp_call", "id": f"mcp_{r.call.id}", "server_label": r.server, "name": r.tool,
                  "arguments": r.call.arguments, "output": r.output, "error": r.error,
                  "status": "failed" if r.error is not None else "completed"} for r in self.ran]
        out = {**answer, "output": [*listings, *items, *answer["output"]]}
        if "tools" in answer:
            out["tools"] = self.client_tools if isinstance(self.client_tools, list) else []
        return out


def _listed(name: str, tool: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": name.partition(SEPARATOR)[2], "description": tool.get("description"),
            "input_schema": tool.get("inputSchema"), "annotations": tool.get("annotations")}


def _text(result: Mapping[str, Any]) -> str:
    """A tool result as the text the model reads: its text parts, else its structured content, else its JSON."""
    parts = result.get("content")
    texts = [p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
             and isinstance(p.get("text"), str)] if isinstance(parts, list) else []
    if texts and len(texts) == len(parts or ()):
        return "\n".join(texts)
    structured = result.get("structuredContent")
    if structured is not None and not texts:
        return json.dumps(structured)
    return json.dumps({k: v for k, v in result.items() if k in ("content", "structuredContent")})
