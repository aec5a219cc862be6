"""End-to-end: prompt-caching breakpoints and their pricing behind a real Switchyard on 127.0.0.1: a fake Bedrock
runtime (``tests/bedrock_fake.py``) that records the Converse bodies it received and reports cache usage, and the
official anthropic SDK against a native anthropic backend (the simulator, which keeps a simulated prompt cache)."""

from __future__ import annotations

import anthropic
import openai
import pytest
import trio

from switchyard.actors.ledger.record import UsageQuery
from switchyard.protocol.wires.cache_breakpoints import CACHE_POINT
from tests.bedrock_fake import Reply
from tests.e2e.support import in_thread
from tests.e2e.test_bedrock_e2e import MODEL, bedrock, config
from tests.e2e.test_bedrock_e2e import aws_env as aws_env  # noqa: F401  (the fixture, autouse here too)
from tests.e2e.test_bedrock_e2e import fake as fake  # noqa: F401

PRICING = {"input_tokens": 0.8, "output_tokens": 4.0, "cache_write_input_tokens": 1.0, "cache_read_input_tokens": 0.08}
TURNS = [{"role": "system", "content": "Policy handbook. " * 40}, {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Refunds?"}]


async def records(gw, count: int = 1):
    """The ledger's records once ``count`` are there: a call's record is told just after its answer reached the
    client, so the client may read the answer first."""
    with trio.fail_after(5):
        while True:
            await gw.app.runtime.ledger.flush()
            found = gw.app.runtime.ledger.store.records(UsageQuery(), 100)
            if len(found) >= count:
                return found
            await trio.sleep(0.02)


async def test_bedrock_gets_cache_points_and_its_cache_usage_is_priced(start_gateway, fake):  # noqa: F811
    backend = bedrock(fake, model_configs=[{"id": MODEL, "upstream_id": "anthropic.claude-3-5-haiku-20241022-v1:0",
                                            "metadata": {"pricing": PRICING}}])
    gw = await start_gateway(config(backend, usage={"ledger": "memory"},
                                    prefix_routing={"anthropic_cache_control_injection": True}))
    fake.script.append(Reply(usage={"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 2000,
                                    "cacheWriteInputTokens": 500, "totalTokens": 2515}))
    with openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10) as client:
        reply = await in_thread(client.chat.completions.create, model=MODEL, messages=TURNS, max_tokens=20)
    assert reply.usage.prompt_tokens == 2510 and reply.usage.prompt_tokens_details.cached_tokens == 2000
    body = fake.last.body
    assert body["system"][-1] == CACHE_POINT and body["messages"][1]["content"][-1] == CACHE_POINT
    assert CACHE_POINT not in body["messages"][2]["content"]
    [rec] = await records(gw)
    assert (rec.cached_tokens, rec.cache_write_tokens) == (2000, 500)
    assert rec.cost == pytest.approx((10 * 0.8 + 500 * 1.0 + 2000 * 0.08 + 5 * 4.0) / 1e6, rel=1e-12)


async def test_the_anthropic_sdk_sees_cache_writes_then_reads_and_the_ledger_prices_both(start_gateway):
    claude = {"name": "claude", "type": "anthropic", "url": "http://claude.simulated", "models": ["claude-x"],
              "simulation": {"latency": "10ms", "chunks": 2},
              "model_configs": [{"id": "claude-x", "metadata": {"pricing": PRICING}}]}
    gw = await start_gateway(config(claude, usage={"ledger": "memory"},
                                    prefix_routing={"anthropic_cache_control_injection": {"backends": ["claude"]}}))
    with anthropic.Anthropic(base_url=gw.url + "/anthropic", api_key="x", max_retries=0, timeout=10) as client:
        def ask() -> anthropic.types.Message:
            return client.messages.create(model="claude-x", max_tokens=20, system=TURNS[0]["content"],
                                          messages=TURNS[1:])
        first = await in_thread(ask)
        second = await in_thread(ask)
    assert first.usage.cache_creation_input_tokens > 0 and not first.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    one, two = sorted(await records(gw, 2), key=lambda r: r.time)
    assert (one.cache_write_tokens, two.cached_tokens) == (first.usage.cache_creation_input_tokens,) * 2
    assert two.cost < one.cost
