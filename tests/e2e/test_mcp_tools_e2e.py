"""MCP tools inside chat and Responses calls, end to end: the official openai SDK on a real socket, a
gateway in process whose simulated model calls the tools it is offered, and the real MCP tool server of
``tests/mcp/tool_server.py`` (over Streamable HTTP, shared by the module; over stdio, started by the
gateway). Each test checks one rule of docs/mcp.md's "MCP tools in chat and Responses calls"."""

from __future__ import annotations

import json
import sys
from typing import Any

import openai
import pytest
import trio

from tests.e2e.conftest import TOOL_SERVER
from tests.e2e.support import backend, gateway_config, in_thread
from tests.e2e.test_otlp_e2e import CLIENT_SPAN, CLIENT_TRACE, attributes, collector, otlp
from tests.servers import lifespan, request_body, serving

pytestmark = pytest.mark.simulator_history   # reads what the simulated backend saw

KEYS = {"full": "sk-mcp-loop-full-0123456789", "echo-only": "sk-mcp-loop-echo-0123456789"}
ANSWER = "The tool said so."


def config(tool_server: str, stdio: bool = False, policy: dict[str, Any] | None = None,
           model: dict[str, Any] | None = None, **simulation: Any) -> dict[str, Any]:
    model = model or backend("a", call_tools=True, text=ANSWER, **simulation)
    model["model_configs"] = [{"id": "demo", "metadata": {"pricing": {"input_tokens": 1, "output_tokens": 2}}}]
    servers: list[dict[str, Any]] = [{"name": "remote", "url": tool_server, "forward_headers": ["x-team"]},
                                     {"name": "limited", "url": tool_server, "timeout": "1s"}]
    if stdio:
        servers.append({"name": "local", "command": sys.executable, "args": [TOOL_SERVER, "stdio"]})
    return gateway_config(
        model, server={"max_body_bytes": 65536}, usage={"ledger": "memory"},
        responses_tools=policy if policy is not None else {"allow": ["mcp"]}, mcp_servers=servers,
        api_keys=[{"id": "full", "key": KEYS["full"]},
                  {"id": "echo-only", "key": KEYS["echo-only"], "allowed_mcp_tools": ["remote__echo"]}])


def client(gw: Any, key: str = "full") -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key=KEYS[key], max_retries=0, timeout=15)


def fed_back(gw: Any) -> list[str]:
    """The tool results the model was given, in the order its rounds were sent (chat and Responses shapes)."""
    out = []
    for sent in gw.sim("a").requests:
        body = json.loads(sent.content)
        for item in [*body.get("messages", ()), *(body.get("input") if isinstance(body.get("input"), list) else ())]:
            if item.get("role") == "tool" or item.get("type") == "function_call_output":
                out.append(item.get("content") or item.get("output"))
    return out


async def ledger(gw: Any, request_id: str) -> list[Any]:
    """The request's records, once the call's own is in (it is written as the call ends, which may be just
    after its client has the answer)."""
    runtime = gw.app.runtime
    with trio.fail_after(5):
        while True:
            await runtime.ledger.flush()
            rows = await runtime.ledger.for_request(request_id)
            if any(r.purpose == "client" for r in rows):
                return rows
            await trio.sleep(0.01)


async def test_a_responses_mcp_tool_is_run_and_its_result_reaches_the_model(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server, tool_arguments='{"text": "hello from the tool"}'))
    with client(gw) as sdk:
        response = await in_thread(lambda: sdk.responses.create(
            model="demo", input="say hello",
            tools=[{"type": "mcp", "server_label": "remote", "allowed_tools": ["echo"], "require_approval": "never"}]))
    listing, call, message = response.output
    assert listing.type == "mcp_list_tools" and [t.name for t in listing.tools] == ["echo"]
    assert (call.type, call.server_label, call.name, call.output, call.error) == \
        ("mcp_call", "remote", "echo", "hello from the tool", None)
    assert json.loads(call.arguments) == {"text": "hello from the tool"}
    assert message.type == "message" and response.output_text == ANSWER
    assert fed_back(gw) == ["hello from the tool"]


async def test_a_chat_mcp_tool_over_stdio_is_run_and_the_client_gets_the_final_message(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server, stdio=True, tool_arguments='{"a": 2, "b": 40}'))
    with client(gw) as sdk:
        completion = await in_thread(lambda: sdk.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "add them"}],
            tools=[{"type": "mcp", "server_label": "local", "allowed_tools": ["add"]}]))   # type: ignore[list-item]
    choice = completion.choices[0]
    assert (choice.message.content, choice.message.tool_calls, choice.finish_reason) == (ANSWER, None, "stop")
    assert fed_back(gw) == ["42"]
    [first, _] = [json.loads(r.content) for r in gw.sim("a").requests]
    assert [t["function"]["name"] for t in first["tools"]] == ["local__add"]   # the mcp entry is never sent


async def test_a_key_allowed_one_tool_cannot_make_the_model_call_another(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server, tool_name="remote__add", tool_arguments='{"a": 1, "b": 2}'))
    with client(gw, "echo-only") as sdk:
        raw = await in_thread(lambda: sdk.chat.completions.with_raw_response.create(
            model="demo", messages=[{"role": "user", "content": "add"}],
            tools=[{"type": "mcp", "server_label": "remote"}]))   # type: ignore[list-item]
    assert raw.parse().choices[0].message.content == ANSWER
    offered = json.loads(gw.sim("a").requests[0].content)["tools"]
    assert [t["function"]["name"] for t in offered] == ["remote__echo"]
    assert fed_back(gw) == ["The tool call failed: Unknown tool: remote__add"]
    [tool] = [r for r in await ledger(gw, raw.headers["x-continuum-request-id"]) if r.purpose == "mcp"]
    assert (tool.model, tool.backend, tool.error_code, tool.attempts) == ("remote__add", None, "unknown_tool", 0)


async def test_every_round_and_each_tool_call_is_recorded_under_the_calls_request_id(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server, tool_arguments='{"text": "x"}'))
    with client(gw) as sdk:
        raw = await in_thread(lambda: sdk.responses.with_raw_response.create(
            model="demo", input="hi", tools=[{"type": "mcp", "server_label": "remote", "allowed_tools": ["echo"]}]))
    request_id = raw.headers["x-continuum-request-id"]
    rows = await ledger(gw, request_id)
    [call] = [r for r in rows if r.purpose == "client"]
    [tool] = [r for r in rows if r.purpose == "mcp"]
    assert call.attempts == 2 and call.cost is not None and call.cost > 0
    assert call.input_tokens > 0 and call.output_tokens > 0
    assert (tool.request_id, tool.key_id, tool.model, tool.backend, tool.status) == \
        (request_id, "full", "remote__echo", "remote", 200)


async def test_a_server_url_other_than_a_configured_servers_is_refused(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server))
    with client(gw) as sdk, pytest.raises(openai.BadRequestError) as refused:
        await in_thread(lambda: sdk.responses.create(model="demo", input="hi", tools=[
            {"type": "mcp", "server_label": "remote", "server_url": "http://127.0.0.1:9/mcp"}]))
    assert refused.value.body["param"] == "tools[0].server_url"
    assert gw.sim("a").requests == []


async def test_the_responses_tools_policy_decides_whether_mcp_may_be_sent_on_both_apis(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server, policy={}))   # the default: unmodeled types denied
    entry = {"type": "mcp", "server_label": "remote"}
    with client(gw) as sdk:
        with pytest.raises(openai.BadRequestError) as responses:
            await in_thread(lambda: sdk.responses.create(model="demo", input="hi", tools=[entry]))
        with pytest.raises(openai.BadRequestError) as chat:
            await in_thread(lambda: sdk.chat.completions.create(
                model="demo", messages=[{"role": "user", "content": "hi"}], tools=[entry]))   # type: ignore[list-item]
    for refused in (responses.value, chat.value):
        assert (refused.body["param"], refused.body["details"]["rule"]) == ("tools[mcp]", "unmodeled_types")
    assert gw.sim("a").requests == []


async def test_a_streamed_call_naming_an_mcp_tool_is_refused(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server))
    with client(gw) as sdk, pytest.raises(openai.BadRequestError) as refused:
        await in_thread(lambda: sdk.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "hi"}], stream=True,
            tools=[{"type": "mcp", "server_label": "remote"}]))   # type: ignore[list-item]
    assert refused.value.body["param"] == "stream"


async def test_a_tool_that_hangs_is_fed_back_as_failed_and_the_call_still_answers(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server, tool_arguments='{"seconds": 30}'))
    with client(gw) as sdk:
        response = await in_thread(lambda: sdk.responses.create(
            model="demo", input="wait", tools=[{"type": "mcp", "server_label": "limited", "allowed_tools": ["sleep"]}]))
    call = next(item for item in response.output if item.type == "mcp_call")
    assert call.output is None and "did not answer within 1s" in call.error
    assert response.output_text == ANSWER
    [fed] = fed_back(gw)
    assert fed.startswith("The tool call failed: limited__sleep did not answer within 1s")


async def test_a_tool_that_crashes_its_server_is_fed_back_as_failed_and_the_call_still_answers(start_gateway,
                                                                                               tool_server):
    gw = await start_gateway(config(tool_server, stdio=True, tool_arguments="{}"))
    with client(gw) as sdk:
        completion = await in_thread(lambda: sdk.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "crash"}],
            tools=[{"type": "mcp", "server_label": "local", "allowed_tools": ["crash"]}]))   # type: ignore[list-item]
    assert completion.choices[0].message.content == ANSWER
    [fed] = fed_back(gw)
    assert fed.startswith("The tool call failed: local__crash failed:"), fed


async def test_a_server_that_sends_what_is_not_json_rpc_mid_call_is_fed_back_as_failed(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server, stdio=True, tool_arguments="{}"))
    with client(gw) as sdk:
        completion = await in_thread(lambda: sdk.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "garble"}],
            tools=[{"type": "mcp", "server_label": "local", "allowed_tools": ["garble"]}]))   # type: ignore[list-item]
    assert completion.choices[0].message.content == ANSWER
    [fed] = fed_back(gw)   # not the server's 30 s timeout: the session ends on the line that is not JSON-RPC
    assert fed.startswith("The tool call failed: local__garble failed: the MCP server local closed the session "
                          "during the call: the server sent what is not JSON-RPC"), fed


async def test_the_calls_forward_headers_reach_the_server_and_its_key_never_does(start_gateway, tool_server):
    gw = await start_gateway(config(tool_server, tool_arguments="{}"))
    sdk = openai.OpenAI(base_url=gw.v1, api_key=KEYS["full"], max_retries=0, timeout=15,
                        default_headers={"x-team": "blue", "x-other": "kept-here"})
    with sdk:
        await in_thread(lambda: sdk.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "headers"}],
            tools=[{"type": "mcp", "server_label": "remote", "allowed_tools": ["headers"]}]))   # type: ignore[list-item]
    [fed] = fed_back(gw)
    seen = json.loads(fed)
    assert seen["x-team"] == "blue" and "x-other" not in seen
    assert KEYS["full"] not in fed and "authorization" not in seen


async def test_a_tool_call_of_the_loop_is_an_execute_tool_span_in_the_calls_trace(start_gateway, tool_server):
    async with collector() as c:
        gw = await start_gateway({**config(tool_server, tool_arguments='{"text": "x"}'), "tracing": otlp(c.url)})
        with client(gw) as sdk:
            raw = await in_thread(lambda: sdk.chat.completions.with_raw_response.create(
                model="demo", messages=[{"role": "user", "content": "echo"}],
                tools=[{"type": "mcp", "server_label": "remote", "allowed_tools": ["echo"]}],   # type: ignore[list-item]
                extra_headers={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"}))
        spans = await c.wait_for(4)   # the call, its two rounds, the tool call
    [tool] = [s for s in spans if s.name == "execute_tool echo"]
    [root] = [s for s in spans if s.name == "router.request"]
    assert tool.trace_id.hex() == root.trace_id.hex() == CLIENT_TRACE
    assert tool.parent_span_id == root.span_id   # inside the call, beside its model rounds
    assert attributes(tool) == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo",
                                "router.mcp_server": "remote", "router.outcome": "ok",
                                "router.request_id": raw.headers["x-continuum-request-id"]}
    assert root.start_time_unix_nano <= tool.start_time_unix_nano <= tool.end_time_unix_nano \
        <= root.end_time_unix_nano


async def chat_only_model(receive: Any, send: Any, scope: dict[str, Any], seen: list[Any]) -> None:
    """A backend that speaks only Chat Completions: a call to ``remote__echo`` while the model has no tool
    result, then an answer."""
    body = json.loads(await request_body(receive))
    seen.append(body)
    tool_results = [m for m in body["messages"] if m.get("role") == "tool"]
    message: dict[str, Any] = {"role": "assistant", "content": ANSWER}
    if not tool_results:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "remote__echo", "arguments": '{"text": "over chat"}'}}]}
    answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": body["model"],
              "choices": [{"index": 0, "message": message,
                           "finish_reason": "stop" if tool_results else "tool_calls"}],
              "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


async def test_a_responses_mcp_call_on_a_backend_that_speaks_only_chat_runs_through_the_bridge(start_gateway,
                                                                                                tool_server):
    seen: list[Any] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
        else:
            await chat_only_model(receive, send, scope, seen)

    async with serving(app) as url:
        model = {"name": "v", "type": "vllm", "url": url, "models": ["demo"]}
        gw = await start_gateway({**config(tool_server, model=model), "health_checks": {"enabled": False}})
        with client(gw) as sdk:
            response = await in_thread(lambda: sdk.responses.create(
                model="demo", input="echo", tools=[{"type": "mcp", "server_label": "remote",
                                                    "allowed_tools": ["echo"]}]))
    listing, call, message = response.output
    assert (listing.type, [t.name for t in listing.tools]) == ("mcp_list_tools", ["echo"])
    assert (call.type, call.name, call.output, call.error) == ("mcp_call", "echo", "over chat", None)
    assert response.output_text == ANSWER
    first, second = seen
    assert [t["function"]["name"] for t in first["tools"]] == ["remote__echo"]
    assert [m.get("content") for m in second["messages"] if m.get("role") == "tool"] == ["over chat"]
