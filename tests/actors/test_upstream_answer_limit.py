"""``server.max_upstream_response_bytes``: a buffered backend answer past it fails that attempt (MockClock)."""

from __future__ import annotations

from tests.harness import chat, gateway, request

BIG = "x" * 70_000   # past the 64 KiB limit once in a JSON answer

CONFIG = f"""
server: {{max_upstream_response_bytes: 64KiB}}
health_checks: {{interval: 1h}}
selection_strategy: RoundRobin
backends:
  - {{name: big, type: simulated, models: [demo], simulation: {{latency: 10ms, chunks: 4, text: "{BIG}"}}}}
"""


async def test_a_buffered_answer_past_max_upstream_response_bytes_is_502_upstream_response_too_large(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 502
        error = reply.json()["error"]
        assert error["code"] == "upstream_response_too_large"
        assert error["details"] == {"limit_bytes": 65536}
        assert "server.max_upstream_response_bytes" in error["message"]


async def test_an_answer_past_the_limit_fails_over_to_another_backend(autojump_clock):
    config = CONFIG + "  - {name: small, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2}}\n"
    async with gateway(config) as app:
        replies = [await request(app, "POST", "/v1/chat/completions", chat()) for _ in range(2)]
        assert [r.status for r in replies] == [200, 200]
        assert all("small" in r.json()["choices"][0]["message"]["content"] for r in replies)


async def test_a_stream_is_relayed_whatever_its_length(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(stream=True))
        assert reply.status == 200 and reply.body.endswith(b"data: [DONE]\n\n")
