"""MCP servers behind the gateway, end to end: a real MCP server of ours built on the ``mcp`` SDK
(``tests/mcp/tool_server.py``) over both transports, ``switchyard serve`` in a process, and the SDK's own
client as the client of ``/mcp``.

The servers and the gateway are started once for the module (each start costs a second or more): a
Streamable HTTP tool server on a loopback port, and the gateway, which starts the stdio ones itself. The
config names the HTTP server twice (``remote``: forwarded headers; ``limited``: a 1 s timeout and a 2000
byte result cap) and the stdio one three times (``local``; ``crashy``, which one test crashes; ``idle``,
which one test kills between calls), so no test's doing disturbs another's, in whatever order they run;
``garbage`` is a stdio command that answers its first line with a line that is not JSON-RPC, and exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import httpx2
import pytest
import trio
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.e2e.conftest import TOOL_SERVER
from tests.e2e.support import REPO, backend, free_port, gateway_config

ADMIN_TOKEN = "mcp-e2e-admin-token-0123456"
KEYS = {"full": "sk-mcp-full-0123456789abcdef", "echo-only": "sk-mcp-echo-0123456789abcdef",
        "limited": "sk-mcp-rate-0123456789abcdef"}
STATIC = "static-credential-from-env"
START_BOUND = 60
GARBAGE = "import sys; sys.stdin.readline(); print('this is not JSON-RPC', flush=True)"


def _config(tmp: Path, url: str) -> dict[str, Any]:
    stdio = {"command": sys.executable, "args": [TOOL_SERVER, "stdio"]}
    config = gateway_config(backend("sim"))
    config["server"] = {"data_dir": str(tmp / "data")}
    config["usage"] = {"flush_interval": "100ms"}
    config["admin"] = {"token": ADMIN_TOKEN}
    config["api_keys"] = [
        {"id": "full", "key": KEYS["full"]},
        {"id": "echo-only", "key": KEYS["echo-only"], "allowed_mcp_tools": ["remote__echo"]},
        {"id": "limited", "key": KEYS["limited"], "rate_limit": {"requests_per_minute": 1}},
    ]
    config["mcp_servers"] = [
        {"name": "local", **stdio},
        {"name": "crashy", **stdio},
        {"name": "idle", **stdio},
        {"name": "garbage", "command": sys.executable, "args": ["-c", GARBAGE], "timeout": "20s"},
        {"name": "remote", "url": url, "forward_headers": ["x-team"],
         "headers": {"x-static": "${MCP_E2E_STATIC}"}},
        {"name": "limited", "url": url, "timeout": "1s", "max_result_bytes": 2000},
    ]
    return config


@pytest.fixture(scope="module")
def gateway(tool_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``switchyard serve`` with the module's config, ready: its URL."""
    tmp = tmp_path_factory.mktemp("mcp")
    path = tmp / "switchyard.yaml"
    path.write_text(yaml.safe_dump(_config(tmp, tool_server)), encoding="utf-8")
    port = free_port()
    log = (tmp / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "switchyard.protocol.serving.cli", "serve", "--config", str(path),
         "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "MCP_E2E_STATIC": STATIC})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_BOUND
        while True:
            assert proc.poll() is None, (tmp / "serve.log").read_text()
            try:
                if httpx.get(url + "/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp / "serve.log").read_text()
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Seen:
    """The request ids (``x-continuum-request-id``) the gateway answered tools/call requests with, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def response(self, response: httpx2.Response) -> None:
        if response.request.headers.get("mcp-method") == "tools/call":
            self.calls.append(response.headers["x-continuum-request-id"])


def mcp_client(gateway: str, key: str, seen: Seen | None = None, **headers: str) -> Client:
    """The SDK's client of the gateway's /mcp, with ``key`` (and ``headers``) on every request."""
    hooks = {"request": [], "response": [seen.response] if seen is not None else []}
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {key}", **headers}, event_hooks=hooks,
                              timeout=httpx2.Timeout(30))
    return Client(streamable_http_client(gateway + "/mcp", http_client=http), cache=None)


def text_of(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def test_the_tools_of_both_servers_are_listed_under_their_server_names(gateway):
    async with mcp_client(gateway, KEYS["full"]) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"local__echo", "local__add", "remote__echo", "remote__add", "remote__big"} <= names
    assert not {"echo", "add"} & names


async def test_a_call_returns_the_upstreams_result_over_both_transports(gateway):
    async with mcp_client(gateway, KEYS["full"]) as client:
        over_stdio = await client.call_tool("local__add", {"a": 2, "b": 3})
        over_http = await client.call_tool("remote__echo", {"text": "hello"})
    assert not over_stdio.is_error and over_stdio.structured_content == {"result": 5}
    assert not over_http.is_error and text_of(over_http) == "hello"


async def test_a_key_allowed_one_tool_can_neither_list_nor_call_another(gateway):
    async with mcp_client(gateway, KEYS["echo-only"]) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert text_of(await client.call_tool("remote__echo", {"text": "ok"})) == "ok"
        with pytest.raises(MCPError) as refused:
            await client.call_tool("remote__add", {"a": 1, "b": 1})
    assert names == ["remote__echo"]
    assert refused.value.code == -32602 and "Unknown tool: remote__add" in refused.value.message


async def test_a_request_without_a_key_gets_401(gateway):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient() as http:
        answer = await http.post(gateway + "/mcp", json=body,
                                 headers={"accept": "application/json, text/event-stream"})
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "missing_api_key"


async def test_each_tool_call_is_a_ledger_record_without_its_arguments(gateway):
    seen = Seen()
    async with mcp_client(gateway, KEYS["full"], seen) as client:
        await client.call_tool("remote__echo", {"text": "secret-argument-7731"})
    [request_id] = seen.calls
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {ADMIN_TOKEN}"}) as http:
        with trio.fail_after(10):
            while True:
                answer = await http.get(f"{gateway}/admin/usage/requests/{request_id}")
                if answer.status_code == 200:
                    break
                await trio.sleep(0.1)
    record = answer.json()
    assert (record["purpose"], record["endpoint"], record["backend"], record["model"], record["key_id"],
            record["status"], record["error_code"]) == ("mcp", "mcp", "remote", "remote__echo", "full", 200, None)
    assert record["latency_ms"] > 0
    assert "secret-argument-7731" not in answer.text


async def test_a_tool_that_hangs_ends_at_its_servers_timeout_with_a_tool_error(gateway):
    async with mcp_client(gateway, KEYS["full"]) as client:
        began = trio.current_time()
        result = await client.call_tool("limited__sleep", {"seconds": 30})
        took = trio.current_time() - began
    assert result.is_error and "did not answer within 1s" in text_of(result)
    assert 1 <= took < 5


async def test_a_result_past_max_result_bytes_is_refused_with_a_tool_error(gateway):
    async with mcp_client(gateway, KEYS["full"]) as client:
        small = await client.call_tool("limited__big", {"size": 100})
        large = await client.call_tool("limited__big", {"size": 5000})
    assert not small.is_error and text_of(small) == "x" * 100
    assert large.is_error and "more than this server's max_result_bytes (2000)" in text_of(large)


async def test_a_crashed_stdio_server_is_restarted_and_answers_again(gateway):
    async with mcp_client(gateway, KEYS["full"]) as client:
        crashed = await client.call_tool("crashy__crash", {})
        assert crashed.is_error and "the server exited" in text_of(crashed)
        with trio.fail_after(20):
            while True:
                again = await client.call_tool("crashy__echo", {"text": "back"})
                if not again.is_error:
                    break
                # until the new process answers, a clear error at once: the server is down, or (a call sent
                # while its exit is still being noticed) the session closed under the call
                assert "unavailable" in text_of(again) or "closed the session during the call" in text_of(again), \
                    text_of(again)
                await trio.sleep(0.2)
    assert text_of(again) == "back"


async def test_a_stdio_server_that_dies_between_calls_is_restarted_and_answers_the_next_call(gateway):
    async with mcp_client(gateway, KEYS["full"]) as client:
        first = (await client.call_tool("idle__pid", {})).structured_content["result"]
        os.kill(first, signal.SIGKILL)   # idle: no call in flight
        failures = []
        with trio.fail_after(20):
            while True:
                again = await client.call_tool("idle__pid", {})
                if not again.is_error:
                    break
                failures.append(text_of(again))
                await trio.sleep(0.1)
    assert again.structured_content["result"] != first
    for failure in failures:   # until the new process answers: a clear error at once, never a hang
        assert "the MCP server idle is unavailable: the server exited" in failure or \
            "closed the session during the call: the server exited" in failure, failure


async def test_a_server_that_answers_what_is_not_json_rpc_gets_a_clear_tool_error(gateway):
    async with mcp_client(gateway, KEYS["full"]) as client:
        with trio.fail_after(10):   # never the server's 20 s timeout: the session is known to be broken
            result = await client.call_tool("garbage__anything", {})
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert result.is_error and "the MCP server garbage" in text_of(result), text_of(result)
    assert "not JSON-RPC" in text_of(result) or "the server exited" in text_of(result), text_of(result)
    assert "local__echo" in names and not any(name.startswith("garbage__") for name in names)
    async with httpx.AsyncClient() as http:
        assert (await http.get(gateway + "/ready")).status_code == 200


async def test_forwarded_headers_reach_the_server_and_the_clients_key_never_does(gateway):
    async with mcp_client(gateway, KEYS["full"], **{"x-team": "blue", "x-other": "kept-here"}) as client:
        seen = (await client.call_tool("remote__headers", {})).structured_content
    assert seen["x-team"] == "blue" and seen["x-static"] == STATIC
    assert "x-other" not in seen
    assert KEYS["full"] not in str(seen)


async def test_tool_calls_count_under_the_keys_rate_limit(gateway):
    async with mcp_client(gateway, KEYS["limited"]) as client:
        await client.call_tool("remote__echo", {"text": "first"})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("remote__echo", {"text": "second"})
    assert refused.value.code == -32029


async def test_tool_calls_are_counted_in_metrics_by_server_tool_and_outcome(gateway):
    async with mcp_client(gateway, KEYS["full"]) as client:
        await client.call_tool("remote__add", {"a": 1, "b": 2})
    async with httpx.AsyncClient() as http:
        page = (await http.get(gateway + "/metrics")).text
    assert 'switchyard_mcp_tool_calls_total{outcome="ok",server="remote",tool="add"}' in page
    assert 'switchyard_mcp_tool_call_duration_seconds_count{outcome="ok",server="remote",tool="add"}' in page
