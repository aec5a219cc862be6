"""Codex CLI as it is, against a vLLM-style chat backend: its recorded requests (store false, encrypted
reasoning asked for, client metadata, a namespace tool and an offered web search) complete through the
Responses bridge, on 127.0.0.1 with real hypercorn on both sides.

The chat backend is a second gateway serving a simulated backend, reached as a ``vllm`` backend: a type
with no Responses API, so every Codex turn goes out as Chat Completions.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from openai.types.responses.response_stream_event import ResponseStreamEvent
from pydantic import TypeAdapter

from tests.clients import recorded
from tests.e2e.support import backend, gateway_config

pytestmark = pytest.mark.simulator_history   # reads what the simulated backend saw

EVENTS = TypeAdapter(ResponseStreamEvent)


async def chat_gateway(start_gateway: Any) -> tuple[Any, Any]:
    upstream_config = gateway_config({**backend("sim-a", chunks=4), "models": ["gpt-5"]})
    config = gateway_config({"name": "vllm", "type": "vllm", "url": "UPSTREAM", "models": ["gpt-5"],
                             "discovery": False}, health_checks={"enabled": False})
    for c in (upstream_config, config):
        c["server"]["max_body_bytes"] = 1024 * 1024   # Codex's requests are about 40 KB
    upstream = await start_gateway(upstream_config)
    config["backends"][0]["url"] = upstream.v1
    return upstream, await start_gateway(config)


async def turn(gw: Any, name: str, fix: Any = None) -> list[Any]:
    codex = recorded(name)
    if fix is not None:
        fix(codex.body)
    headers = {k.decode(): v.decode() for k, v in codex.headers}
    async with httpx.AsyncClient(base_url=gw.url, timeout=15) as http:
        reply = await http.post(codex.path, json=codex.body, headers=headers)
    assert reply.status_code == 200, reply.text
    return [EVENTS.validate_python(json.loads(line.removeprefix("data: ")))
            for line in reply.text.splitlines() if line.startswith("data: ")]


def json_arguments(body: dict) -> None:
    """The recording replaced the call's arguments with filler: Codex sends JSON there."""
    for item in body["input"]:
        if item.get("type") == "function_call":
            item["arguments"] = json.dumps({"cmd": "ls"})


async def test_codexs_first_turn_completes_on_a_chat_backend(start_gateway):
    upstream, gw = await chat_gateway(start_gateway)
    events = await turn(gw, "codex-0.171.0-exec-first")
    sent = json.loads(upstream.sim("sim-a").requests[-1].content)
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert events[-1].response.output_text.startswith("Hello from sim-a.")
    names = [t["function"]["name"] for t in sent["tools"]]
    assert "multi_agent_v1__spawn_agent" in names and "exec_command" in names   # the namespace, flattened
    assert len(names) == 12   # 7 functions and the namespace's 5; the offered web search left out
    assert not {"include", "client_metadata", "store"} & set(sent)
    assert sent["prompt_cache_key"] == recorded("codex-0.171.0-exec-first").body["prompt_cache_key"]


async def test_codexs_follow_up_turn_after_a_function_call_completes_on_a_chat_backend(start_gateway):
    upstream, gw = await chat_gateway(start_gateway)
    events = await turn(gw, "codex-0.171.0-exec-followup", json_arguments)
    sent = json.loads(upstream.sim("sim-a").requests[-1].content)
    assert events[-1].type == "response.completed"
    roles = [m["role"] for m in sent["messages"]]
    assert roles[-2:] == ["assistant", "tool"] and sent["messages"][-2]["tool_calls"][0]["function"]["name"] == \
        "exec_command"
