"""MCP tools inside chat calls under MockClock: the tool loop's calls against the call's budget, its client,
and its client's address. The MCP servers are a fake behind the actors' ``ToolServers`` port (a real server is
a subprocess, which virtual time cannot drive; tests/e2e/test_mcp_tools_e2e.py runs the real ones)."""

from __future__ import annotations

import contextlib
import json
from typing import Any, AsyncIterator, Mapping

import pytest
import trio

from switchyard.actors.ledger.record import UsageQuery
from switchyard.actors.mcp.port import ToolResult
from switchyard.config.load import load_text
from switchyard.config.schema import Snapshot
from switchyard.protocol.serving.app import App
from switchyard.protocol.serving.wiring import new_runtime
from tests.harness import chat, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backend saw

CONFIG = """
health_checks: {interval: 1h}
usage: {ledger: memory}
responses_tools: {allow: [mcp]}
timeouts: {request: {standard: {first_byte: 5s, total: 5s}}}   # the call's budget: 2 x 5 s
backends:
  - name: a
    type: simulated
    models: [demo]
    simulation: {latency: 100ms, call_tools: true, tool_arguments: '{"text": "hi"}', text: "Done."}
mcp_servers:
  - {name: tools, command: /bin/true, timeout: 1h}
EXTRA
"""
MCP = {"type": "mcp", "server_label": "tools"}
ECHO = {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}


class FakeServers:
    """The ``ToolServers`` port: one tool, ``echo``; ``hang`` makes ``list`` or ``call`` never answer."""

    def __init__(self) -> None:
        self.hang: set[str] = set()       # "list", "call", or a server's name (its listing never answers)
        self.called: list[tuple[str, str]] = []
        self.listed: list[str] = []

    async def list_tools(self, server: str) -> tuple[Mapping[str, Any], ...]:
        self.listed.append(server)
        if "list" in self.hang or server in self.hang:
            await trio.sleep_forever()
        return (ECHO,)

    async def call_tool(self, server: str, tool: str, arguments: Mapping[str, Any] | None,
                        forwarded: Mapping[str, str]) -> ToolResult:
        self.called.append((server, tool))
        if "call" in self.hang:
            await trio.sleep_forever()
        return ToolResult({"content": [{"type": "text", "text": str((arguments or {}).get("text"))}]}, 10)

    def reconfigure(self, snapshot: Snapshot) -> None:
        pass


@contextlib.asynccontextmanager
async def tool_gateway(fake: FakeServers, extra: str = "") -> AsyncIterator[App]:
    snapshot = load_text(CONFIG.replace("EXTRA", extra)).snapshot
    async with trio.open_nursery() as nursery:
        runtime = new_runtime(snapshot)
        runtime.tool_servers = runtime.tool_calls.servers = fake   # never started: no subprocess
        await nursery.start(runtime.run)
        yield App(lambda: snapshot, runtime=runtime)
        nursery.cancel_scope.cancel()


async def tool_records(app: App) -> list[Any]:
    await app.runtime.ledger.flush()
    rows = app.runtime.ledger.store.records(UsageQuery(purpose=None), 1000)
    return [r for r in rows if r.purpose == "mcp"]


def fed_back(app: App) -> list[str]:
    sim = app.runtime.upstream.simulated["a.simulated"]
    return [m["content"] for r in sim.requests for m in json.loads(r.content)["messages"] if m.get("role") == "tool"]


async def test_a_tool_call_cut_by_the_calls_budget_is_a_504_timeout_record(autojump_clock):
    fake = FakeServers()
    fake.hang.add("call")
    async with tool_gateway(fake) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(tools=[MCP]))
        [record] = await tool_records(app)
    assert reply.ended_at == pytest.approx(10.0)   # the budget's end, not the server's 1 h timeout
    assert reply.status == 504 and reply.json()["error"]["details"]["timeout"] == "fallback_budget"
    assert (record.model, record.backend, record.status, record.error_code) == ("tools__echo", "tools", 504, "timeout")
    assert record.latency_ms == pytest.approx(10_000 - 100, abs=1)   # from the first round's answer


async def test_a_tool_call_whose_client_left_is_a_499_record(autojump_clock):
    fake = FakeServers()
    fake.hang.add("call")
    async with tool_gateway(fake) as app:
        await request(app, "POST", "/v1/chat/completions", chat(tools=[MCP]), disconnect_at=3.0)
        [record] = await tool_records(app)
    assert fake.called == [("tools", "echo")]
    assert (record.model, record.status, record.error_code) == ("tools__echo", 499, "client_disconnected")
    assert record.latency_ms == pytest.approx(3_000 - 100, abs=1)


async def test_the_first_listing_of_the_servers_tools_ends_with_the_calls_budget(autojump_clock):
    fake = FakeServers()
    fake.hang.add("list")
    async with tool_gateway(fake) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(tools=[MCP]))
    # the listing is cut where the budget ends (not at the server's 1 h timeout), and the call ends there
    assert reply.ended_at == pytest.approx(10.0)
    assert reply.status == 504 and reply.json()["error"]["details"]["timeout"] == "fallback_budget"
    assert fake.called == []


async def test_tool_calls_in_a_chat_call_count_under_the_per_client_ip_rate_limit(autojump_clock):
    fake = FakeServers()
    limit = "rate_limiting: {per_client_ip: {requests_per_minute: 1}}"
    async with tool_gateway(fake, limit) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(tools=[MCP]), client=("10.0.0.7", 4000))
        [record] = await tool_records(app)
    # the call took the address's one request a minute: its tool call is refused, fed back, and recorded
    assert reply.status == 200 and reply.json()["choices"][0]["message"]["content"] == "Done."
    assert fake.called == []
    [fed] = fed_back(app)
    assert fed.startswith("The tool call failed: tools__echo not run:"), fed
    assert (record.status, record.error_code) == (429, "rate_limited")


async def test_a_chat_call_lists_only_the_servers_it_names(autojump_clock):
    fake = FakeServers()
    fake.hang.add("other")   # another server the key reaches, whose listing would never answer
    async with tool_gateway(fake, "  - {name: other, command: /bin/true, timeout: 1h}") as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(tools=[MCP]))
    assert reply.status == 200 and reply.ended_at == pytest.approx(0.2)   # two rounds of 100 ms, no wait
    assert "other" not in fake.listed and fake.called == [("tools", "echo")]
