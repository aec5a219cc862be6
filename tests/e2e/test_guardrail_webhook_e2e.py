"""The external guardrail against a real local HTTP server (issue 23): allow, block, rewrite, a
timeout, a bad answer, and both failure modes. Real clock; the gateway is driven in memory."""

import json

import pytest
import trio

from tests.harness import gateway, request
from tests.servers import lifespan, request_body, serving

pytestmark = pytest.mark.simulator_history

EMAIL = "hong@example.com"


class Hook:
    """An operator's guardrail service: its answer depends on the path it is posted to."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict, dict]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await request_body(receive)
        asked = json.loads(body)
        self.seen.append((scope["path"], asked, dict(scope["headers"])))
        path = scope["path"]
        status, answer = 200, {"action": "allow"}
        if path == "/block":
            answer = {"action": "block", "reason": "off-topic"}
        elif path == "/rewrite":
            answer = {"action": "rewrite",
                      "messages": [{"role": m["role"], "content": m["content"].upper()} for m in asked["messages"]]}
        elif path == "/slow":
            await trio.sleep(2)
        elif path == "/broken":
            status = 500
        elif path == "/garbage":
            answer = {"verdict": "maybe"}
        data = json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


def config(url, on_failure="fail_closed", mode="enforce"):
    return f"""
usage: {{ledger: memory}}
health_checks: {{interval: 1h}}
backends:
  - name: sim
    type: simulated
    models: [demo]
    simulation: {{latency: 1ms, chunks: 1, text: fine}}
guardrails:
  - name: policy
    mode: {mode}
    webhook:
      url: {url}
      timeout: 300ms
      on_failure: {on_failure}
      headers: {{authorization: Bearer hook-token}}
"""


def chat():
    return {"model": "demo", "messages": [{"role": "system", "content": "be kind"},
                                          {"role": "user", "content": f"mail {EMAIL}"}]}


def sent(app):
    return [json.loads(r.content) for r in app.runtime.upstream.simulated["sim.simulated"].requests]


async def call(path, **kw):
    hook = Hook()
    async with serving(hook) as url:
        async with gateway(config(url + path, **kw)) as app:
            with trio.fail_after(10):
                reply = await request(app, "POST", "/v1/chat/completions", chat())
            return hook, reply, sent(app), app


async def test_allow_lets_the_call_through_unchanged_and_posts_the_documented_shape():
    hook, reply, upstream, _ = await call("/allow")
    assert reply.status == 200 and upstream[0]["messages"][1]["content"] == f"mail {EMAIL}"
    [(_, asked, headers)] = hook.seen
    assert asked["guardrail"] == "policy" and asked["stage"] == "input" and asked["model"] == "demo"
    assert asked["messages"] == [{"role": "system", "content": "be kind"},
                                 {"role": "user", "content": f"mail {EMAIL}"}]
    assert headers[b"authorization"] == b"Bearer hook-token"


async def test_block_refuses_with_the_services_reason_before_the_upstream():
    _, reply, upstream, _ = await call("/block")
    assert reply.status == 400 and upstream == []
    error = reply.json()["error"]
    assert error["code"] == "guardrail_blocked" and "off-topic" in error["message"]
    assert error["details"] == {"guardrail": "policy", "stage": "input", "detector": "webhook"}


async def test_rewrite_replaces_each_message_text_in_place():
    _, reply, upstream, _ = await call("/rewrite")
    assert reply.status == 200
    assert [m["content"] for m in upstream[0]["messages"]] == ["BE KIND", f"MAIL {EMAIL.upper()}"]


async def test_a_timeout_fails_closed_with_503_at_the_time_limit():
    began = trio.current_time()
    _, reply, upstream, _ = await call("/slow")
    assert reply.status == 503 and reply.json()["error"]["code"] == "guardrail_unavailable"
    assert reply.json()["error"]["details"]["reason"] == "timeout" and upstream == []
    assert trio.current_time() - began < 2


async def test_a_timeout_fails_open_and_the_call_goes_on():
    _, reply, upstream, app = await call("/slow", on_failure="fail_open")
    assert reply.status == 200 and len(upstream) == 1
    assert app.runtime.guardrail_verdicts.as_dict() == {("policy", "input", "allow", "enforce"): 1}


@pytest.mark.parametrize("path, failure", [("/broken", "status"), ("/garbage", "malformed")])
async def test_a_bad_answer_follows_on_failure(path, failure):
    _, closed, _, _ = await call(path)
    assert closed.status == 503 and closed.json()["error"]["details"]["reason"] == failure
    _, opened, upstream, _ = await call(path, on_failure="fail_open")
    assert opened.status == 200 and len(upstream) == 1


async def test_monitor_mode_records_a_block_and_changes_nothing():
    _, reply, upstream, app = await call("/block", mode="monitor")
    assert reply.status == 200 and upstream[0]["messages"][1]["content"] == f"mail {EMAIL}"
    assert app.runtime.guardrail_verdicts.as_dict() == {("policy", "input", "block", "monitor"): 1}
