"""Two real gateways on 127.0.0.1 that list each other as backends: the hop guard ends the loop at once."""

from __future__ import annotations

import functools
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import trio
import yaml
from hypercorn.trio import serve

from switchyard.actors.hops import HEADER
from switchyard.config.load import load_file
from switchyard.protocol.serving.app import create_app
from switchyard.protocol.serving.workers import hypercorn_config
from tests.e2e.support import backend, free_port

CHAT = {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "demo", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


def peer(name: str, port: int) -> dict[str, Any]:
    """Another gateway as an OpenAI-compatible backend serving ``demo``."""
    return {"name": name, "type": "openai", "url": f"http://127.0.0.1:{port}/v1", "models": ["demo"],
            "discovery": False}


def config(port: int, *backends: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"server": {"bind_address": f"127.0.0.1:{port}"}, "health_checks": {"enabled": False},
            "backends": list(backends), **top}


@asynccontextmanager
async def gateways(tmp_path: Path, *configs: dict[str, Any]) -> AsyncIterator[list[str]]:
    """One real gateway per config, each on its own ``server.bind_address``, stopped on exit."""
    async with trio.open_nursery() as nursery:
        stop = trio.Event()
        urls = []
        for i, cfg in enumerate(configs):
            path = tmp_path / f"gateway-{i}.yaml"
            path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
            server = load_file(str(path)).snapshot.server
            hc = hypercorn_config(server, server.bind_address)
            hc.graceful_timeout = 1.0
            with trio.fail_after(5):
                await nursery.start(functools.partial(serve, create_app(str(path)), hc, shutdown_trigger=stop.wait))
            urls.append("http://" + server.bind_address)
        try:
            yield urls
        finally:
            stop.set()
            nursery.cancel_scope.deadline = trio.current_time() + 5


async def test_two_gateways_that_list_each_other_answer_508_loop_detected(tmp_path):
    a, b = free_port(), free_port()
    async with gateways(tmp_path, config(a, peer("b", b)), config(b, peer("a", a))) as (url_a, _):
        async with httpx.AsyncClient(timeout=10) as http:
            with trio.fail_after(10):
                reply = await http.post(url_a + "/v1/chat/completions", json=CHAT)
    assert reply.status_code == 508
    error = reply.json()["error"]
    assert error["code"] == "loop_detected" and error["param"] == HEADER
    # A -> B -> A -> B -> A: the last arrival counts 4 gateways, past the default max_hops of 3
    assert error["details"] == {"hops": 4, "max_hops": 3}
    assert reply.headers["x-continuum-request-id"].startswith("req_")


async def test_with_dedup_on_a_call_that_came_round_the_loop_does_not_wait_on_itself(tmp_path):
    a, b = free_port(), free_port()
    dedup = {"dedup": {"enabled": True}}
    async with gateways(tmp_path, config(a, peer("b", b), **dedup), config(b, peer("a", a), **dedup)) as (url_a, _):
        async with httpx.AsyncClient(timeout=10) as http:
            with trio.fail_after(10):
                reply = await http.post(url_a + "/v1/chat/completions", json=CHAT)
    assert reply.status_code == 508 and reply.json()["error"]["details"] == {"hops": 4, "max_hops": 3}


async def test_the_loop_reaches_an_anthropic_client_in_the_anthropic_shape(tmp_path):
    a, b = free_port(), free_port()
    async with gateways(tmp_path, config(a, peer("b", b)), config(b, peer("a", a))) as (url_a, _):
        async with httpx.AsyncClient(timeout=10) as http:
            with trio.fail_after(10):
                reply = await http.post(url_a + "/anthropic/v1/messages", json=MESSAGES)
    assert reply.status_code == 508
    body = reply.json()
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert HEADER in body["error"]["message"] and "server.max_hops" in body["error"]["message"]


async def test_a_chain_of_gateways_shorter_than_max_hops_still_answers(tmp_path):
    a, b = free_port(), free_port()
    async with gateways(tmp_path, config(b, backend("sim")), config(a, peer("b", b))) as (_, url_a):
        async with httpx.AsyncClient(timeout=10) as http:
            with trio.fail_after(10):
                reply = await http.post(url_a + "/v1/chat/completions", json=CHAT)
                refused = await http.post(url_a + "/v1/chat/completions", json=CHAT, headers={HEADER: "3"})
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]
    # 3 gateways passed before A is allowed there; B sees 4 and ends it
    assert refused.status_code == 508 and refused.json()["error"]["details"] == {"hops": 4, "max_hops": 3}
