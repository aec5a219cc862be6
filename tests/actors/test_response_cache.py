"""The response cache (``response_cache``) through the real pipeline, on simulated backends. MockClock.

Each rule of docs/cache.md has its test: what is stored (clean answers only),
what a hit looks like (buffered or streamed, whichever way it was stored),
what is bypassed and why, the header, the ledger record, the TTL and the
LRU bound at exact virtual instants.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from switchyard.actors.ledger.record import UsageQuery
from tests.harness import Reply, chat, gateway, request

pytestmark = pytest.mark.simulator_history

BACKEND = """
  - name: {name}
    type: simulated
    models: [demo]
    simulation: {{latency: 10ms, chunks: 4, text: "The answer is forty two."{extra}}}
"""


def config(cache: str = "{enabled: true}", backends: tuple[str, ...] = ("a",), extra: str = "",
           top: str = "") -> str:
    listed = "".join(BACKEND.format(name=n, extra=extra) for n in backends)
    return f"backends:{listed}usage: {{ledger: memory}}\nresponse_cache: {cache}\n{top}"


def ask(stream: bool = False, **extra: Any) -> dict[str, Any]:
    return chat(stream=stream, temperature=0, **extra)


async def call(app: Any, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None) -> Reply:
    return await request(app, "POST", "/v1/chat/completions", body, headers=headers)


def served(app: Any, name: str = "a") -> int:
    return app.runtime.upstream.simulated[f"{name}.simulated"].served


def text_of(reply: Reply) -> str:
    """The answer's text, streamed or not."""
    if reply.headers.get(b"content-type", b"").startswith(b"text/event-stream"):
        out = []
        for data in reply.events():
            if data == b"[DONE]":
                continue
            for choice in json.loads(data).get("choices") or ():
                out.append(choice["delta"].get("content") or "")
        return "".join(out)
    return reply.json()["choices"][0]["message"]["content"]


def finish_of(reply: Reply) -> str:
    if reply.headers.get(b"content-type", b"").startswith(b"text/event-stream"):
        reasons = [c.get("finish_reason") for d in reply.events() if d != b"[DONE]"
                   for c in json.loads(d).get("choices") or ()]
        return [r for r in reasons if r][-1]
    return reply.json()["choices"][0]["finish_reason"]


async def test_a_buffered_answer_is_served_again_without_a_backend_call(autojump_clock):
    async with gateway(config()) as app:
        first = await call(app, ask())
        again = await call(app, ask())
    assert (first.status, again.status) == (200, 200)
    assert first.headers[b"x-continuum-cache"] == b"miss"
    assert again.headers[b"x-continuum-cache"] == b"hit"
    assert served(app) == 1
    assert again.json() == first.json()


async def test_a_streamed_answer_is_replayed_as_a_stream_with_the_same_text_and_finish(autojump_clock):
    async with gateway(config()) as app:
        first = await call(app, ask(stream=True))
        again = await call(app, ask(stream=True))
    assert again.headers[b"x-continuum-cache"] == b"hit"
    assert served(app) == 1
    assert text_of(again) == text_of(first) == "The answer is forty two."
    assert finish_of(again) == finish_of(first) == "stop"
    assert again.events()[-1] == b"[DONE]"
    assert [json.loads(e) for e in again.events()[:-1]] == [json.loads(e) for e in first.events()[:-1]]   # per chunk


async def test_a_buffered_answer_streamed_to_a_hit_is_re_chunked_with_the_original_identity(autojump_clock):
    async with gateway(config()) as app:
        first = await call(app, ask())
        again = await call(app, ask(stream=True))
    original = first.json()
    chunks = [json.loads(e) for e in again.events()[:-1]]
    assert {(c["object"], c["id"], c["model"], c["created"]) for c in chunks} == \
        {("chat.completion.chunk", original["id"], original["model"], original["created"])}
    assert len(chunks) == 3   # the role, the text, the finish
    assert text_of(again) == original["choices"][0]["message"]["content"]


async def test_a_stored_stream_answers_a_buffered_call_and_the_other_way_round(autojump_clock):
    async with gateway(config()) as app:
        streamed = await call(app, ask(stream=True))
        buffered = await call(app, ask())
        other = ask(messages=[{"role": "user", "content": "other"}])
        stored = await call(app, other)
        as_stream = await call(app, {**other, "stream": True})
    assert buffered.headers[b"x-continuum-cache"] == b"hit"
    assert text_of(buffered) == text_of(streamed)
    assert buffered.json()["object"] == "chat.completion"
    assert as_stream.headers[b"x-continuum-cache"] == b"hit"
    assert text_of(as_stream) == text_of(stored)
    assert finish_of(as_stream) == finish_of(stored)
    assert served(app) == 2


async def test_usage_is_replayed_when_the_client_asks_for_it(autojump_clock):
    async with gateway(config()) as app:
        first = await call(app, ask(stream=True, stream_options={"include_usage": True}))
        again = await call(app, ask(stream=True, stream_options={"include_usage": True}))
        buffered = await call(app, ask())
    usage = [json.loads(d)["usage"] for d in first.events() if d != b"[DONE]" and json.loads(d).get("usage")]
    replayed = [json.loads(d)["usage"] for d in again.events() if d != b"[DONE]" and json.loads(d).get("usage")]
    assert replayed and usage
    assert {k: v for k, v in replayed[0].items()} == {k: v for k, v in usage[0].items() if k != "cost"}
    assert buffered.json()["usage"] == replayed[0]


@pytest.mark.parametrize("failure", ["{truncate_after_chunk: 2}", "{reset_after_chunk: 2}", "{omit_done: true}",
                                     "{error_event_after_chunk: 2}", "{malformed_chunk: 2}"])
async def test_a_stream_cut_half_way_is_never_stored(autojump_clock, failure):
    async with gateway(config(extra=f", failure: {failure}")) as app:
        first = await call(app, ask(stream=True))
        again = await call(app, ask(stream=True))
        stats = app.runtime.cache
    assert first.headers[b"x-continuum-cache"] == b"miss"
    assert again.headers[b"x-continuum-cache"] == b"miss"
    assert served(app) == 2
    assert stats.stored == 0


@pytest.mark.parametrize("stream", [False, True])
async def test_an_error_answer_is_never_stored(autojump_clock, stream):
    async with gateway(config(extra=", failure: {status: 400}")) as app:   # a 400 opens no circuit
        first = await call(app, ask(stream=stream))
        again = await call(app, ask(stream=stream))
    assert first.status == again.status == 400
    assert again.headers[b"x-continuum-cache"] == b"miss"
    assert app.runtime.cache.stored == 0 and app.runtime.cache.not_stored["error"] == 2


async def test_cache_control_no_store_neither_reads_nor_writes(autojump_clock):
    async with gateway(config()) as app:
        skipped = await call(app, ask(), [(b"cache-control", b"no-store")])
        first = await call(app, ask())
        again = await call(app, ask(), [(b"cache-control", b"No-Store")])
    assert skipped.headers[b"x-continuum-cache"] == b"bypass"
    assert first.headers[b"x-continuum-cache"] == b"miss"
    assert again.headers[b"x-continuum-cache"] == b"bypass"
    assert served(app) == 3


async def test_cache_control_no_cache_does_not_read_but_stores(autojump_clock):
    async with gateway(config()) as app:
        await call(app, ask())
        fresh = await call(app, ask(), [(b"cache-control", b"no-cache")])
        again = await call(app, ask())
    assert fresh.headers[b"x-continuum-cache"] == b"bypass"
    assert again.headers[b"x-continuum-cache"] == b"hit"
    assert served(app) == 2
    assert app.runtime.cache.stored == 2


async def test_a_call_without_a_temperature_is_cached(autojump_clock):
    async with gateway(config()) as app:
        await call(app, chat())
        again = await call(app, chat())
    assert again.headers[b"x-continuum-cache"] == b"hit"


@pytest.mark.parametrize("temperature", [0.7, 2])
async def test_a_temperature_above_zero_is_a_bypass_unless_configured(autojump_clock, temperature):
    body = chat(temperature=temperature)
    async with gateway(config()) as app:
        await call(app, body)
        again = await call(app, body)
    assert again.headers[b"x-continuum-cache"] == b"bypass"
    assert app.runtime.cache.bypasses["temperature"] == 2
    async with gateway(config("{enabled: true, cache_temperature_above_zero: true}")) as app:
        await call(app, body)
        again = await call(app, body)
    assert again.headers[b"x-continuum-cache"] == b"hit"


KEYS = """api_keys:
  - {id: one, key: sk-one-0123456789}
  - {id: two, key: sk-two-0123456789}
"""


def bearer(secret: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {secret}".encode())]


async def test_one_keys_answer_never_answers_another_key(autojump_clock):
    async with gateway(config(top=KEYS)) as app:
        await call(app, ask(), bearer("sk-one-0123456789"))
        other = await call(app, ask(), bearer("sk-two-0123456789"))
        same = await call(app, ask(), bearer("sk-one-0123456789"))
    assert other.headers[b"x-continuum-cache"] == b"miss"
    assert same.headers[b"x-continuum-cache"] == b"hit"
    assert served(app) == 2


async def test_shared_across_keys_lets_keys_share_answers(autojump_clock):
    async with gateway(config("{enabled: true, shared_across_keys: true}", top=KEYS)) as app:
        await call(app, ask(), bearer("sk-one-0123456789"))
        other = await call(app, ask(), bearer("sk-two-0123456789"))
    assert other.headers[b"x-continuum-cache"] == b"hit"


async def test_only_the_keys_listed_are_cached(autojump_clock):
    async with gateway(config("{enabled: true, keys: [one]}", top=KEYS)) as app:
        await call(app, ask(), bearer("sk-two-0123456789"))
        two = await call(app, ask(), bearer("sk-two-0123456789"))
        await call(app, ask(), bearer("sk-one-0123456789"))
        one = await call(app, ask(), bearer("sk-one-0123456789"))
    assert two.headers[b"x-continuum-cache"] == b"bypass"
    assert one.headers[b"x-continuum-cache"] == b"hit"
    assert app.runtime.cache.bypasses["key"] == 2


async def test_only_the_models_listed_are_cached(autojump_clock):
    async with gateway(config("{enabled: true, models: ['gpt-*']}")) as app:
        await call(app, ask())
        again = await call(app, ask())
    assert again.headers[b"x-continuum-cache"] == b"bypass"
    assert app.runtime.cache.bypasses["model"] == 2


async def test_an_entry_expires_at_its_ttl_exactly(autojump_clock):
    async with gateway(config("{enabled: true, ttl: 10s}")) as app:
        await call(app, ask())          # stored when its answer is out
        stored_at = trio.current_time()
        await trio.sleep_until(stored_at + 9.999)
        before = await call(app, ask())
        await trio.sleep_until(stored_at + 10)
        after = await call(app, ask())
    assert before.headers[b"x-continuum-cache"] == b"hit"
    assert after.headers[b"x-continuum-cache"] == b"miss"
    assert app.runtime.cache.store.expirations == 1


async def test_the_least_recently_used_entry_goes_first_past_max_entries(autojump_clock):
    def numbered(i: int) -> dict[str, Any]:
        return ask(messages=[{"role": "user", "content": f"question {i}"}])
    async with gateway(config("{enabled: true, max_entries: 2}")) as app:
        await call(app, numbered(1))
        await call(app, numbered(2))
        await call(app, numbered(1))            # a hit: 1 is now the most recently used
        await call(app, numbered(3))            # evicts 2
        one = await call(app, numbered(1))
        two = await call(app, numbered(2))
    assert one.headers[b"x-continuum-cache"] == b"hit"
    assert two.headers[b"x-continuum-cache"] == b"miss"
    assert app.runtime.cache.store.evictions >= 1


async def test_an_answer_larger_than_max_entry_bytes_is_not_stored(autojump_clock):
    async with gateway(config("{enabled: true, max_entry_bytes: 256}")) as app:
        await call(app, ask())
        again = await call(app, ask())
    assert again.headers[b"x-continuum-cache"] == b"miss"
    assert app.runtime.cache.not_stored["too_large"] == 2


async def test_several_eligible_backends_bypass_the_cache(autojump_clock):
    async with gateway(config(backends=("a", "b"))) as app:
        await call(app, ask())
        again = await call(app, ask())
    assert again.headers[b"x-continuum-cache"] == b"bypass"
    assert app.runtime.cache.bypasses["several_backends"] == 2


async def test_a_pin_settles_the_backend_and_the_pinned_backend_is_part_of_the_key(autojump_clock):
    async with gateway(config(backends=("a", "b"))) as app:
        await call(app, ask(), [(b"x-backend", b"a")])
        on_a = await call(app, ask(), [(b"x-backend", b"a")])
        on_b = await call(app, ask(), [(b"x-backend", b"b")])
    assert on_a.headers[b"x-continuum-cache"] == b"hit"
    assert on_b.headers[b"x-continuum-cache"] == b"miss"


async def test_a_fallback_chain_bypasses_the_cache(autojump_clock):
    top = "fallback: {enabled: true, fallback_chains: {demo: [other]}}\n"
    chain = "  - {name: z, type: simulated, models: [other], simulation: {latency: 10ms}}\n"
    async with gateway(config(top=top).replace("usage:", chain.rstrip("\n") + "\nusage:", 1)) as app:
        await call(app, ask())
        again = await call(app, ask())
    assert again.headers[b"x-continuum-cache"] == b"bypass"
    assert app.runtime.cache.bypasses["fallback_chain"] == 2


async def test_a_hit_is_a_ledger_record_with_cache_hit_and_cost_zero(autojump_clock):
    async with gateway(config()) as app:
        first = await call(app, ask())
        again = await call(app, ask())
        await app.runtime.ledger.flush()
        records = app.runtime.ledger.store.records(UsageQuery(purpose=None), 100)
    by_id = {r.request_id: r for r in records}
    miss = by_id[first.headers[b"x-continuum-request-id"].decode()]
    hit = by_id[again.headers[b"x-continuum-request-id"].decode()]
    assert (miss.cache_hit, hit.cache_hit) == (False, True)
    assert (hit.cost, hit.attempts, hit.backend, hit.served_model, hit.status) == (0.0, 0, "a", "demo", 200)
    assert hit.input_tokens == hit.output_tokens == 0


async def test_without_the_cache_answers_carry_no_cache_header(autojump_clock):
    async with gateway(config("{enabled: false}")) as app:
        reply = await call(app, ask())
    assert b"x-continuum-cache" not in reply.headers


async def test_the_metrics_count_hits_misses_bypasses_stores_and_bytes(autojump_clock):
    async with gateway(config()) as app:
        await call(app, ask())
        await call(app, ask())
        await call(app, ask(), [(b"cache-control", b"no-store")])
        page = (await request(app, "GET", "/metrics")).body.decode()
    lines = dict(line.rsplit(" ", 1) for line in page.splitlines() if line.startswith("response_cache"))
    assert float(lines["response_cache_hits_total"]) == 1
    assert float(lines["response_cache_misses_total"]) == 1
    assert float(lines['response_cache_bypasses_total{reason="no_store"}']) == 1
    assert float(lines['response_cache_bypasses_total{reason="temperature"}']) == 0
    assert float(lines["response_cache_stores_total"]) == 1
    assert float(lines["response_cache_stored_bytes"]) > 0
    assert float(lines["response_cache_entries"]) == 1
    assert float(lines['response_cache_evictions_total{reason="size"}']) == 0


async def test_a_dedup_followers_copy_is_never_stored_only_the_leaders_answer(autojump_clock):
    async with gateway(config(top="dedup: {enabled: true}\n")) as app:
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(call, app, ask(stream=True))
        again = await call(app, ask())
    assert served(app) == 1
    assert app.runtime.dedup.counts  # the three shared one flight
    assert app.runtime.cache.stored == 1
    assert again.headers[b"x-continuum-cache"] == b"hit"


async def test_a_reload_that_keeps_the_backend_keeps_the_cache_and_one_that_moves_it_does_not(autojump_clock):
    from switchyard.config.load import load_text
    async with gateway(config()) as app:
        await call(app, ask())
        app.runtime.apply(load_text(config(top="dedup: {enabled: false}\n")).snapshot)   # a new revision
        kept = await call(app, ask())
        app.runtime.apply(load_text(config(backends=("b",))).snapshot)   # the model moved to another backend
        fresh = await call(app, ask())
    assert kept.headers[b"x-continuum-cache"] == b"hit"
    assert fresh.headers[b"x-continuum-cache"] == b"miss"


async def test_a_hit_counts_against_the_keys_request_rate_limit(autojump_clock):
    keyed = """api_keys:
  - {id: one, key: sk-one-0123456789, rate_limit: {requests_per_minute: 2}}
"""
    async with gateway(config(top=keyed)) as app:
        first = await call(app, ask(), bearer("sk-one-0123456789"))
        hit = await call(app, ask(), bearer("sk-one-0123456789"))
        refused = await call(app, ask(), bearer("sk-one-0123456789"))
    assert (first.status, hit.status, refused.status) == (200, 200, 429)
    assert hit.headers[b"x-continuum-cache"] == b"hit"
    assert b"x-continuum-cache" not in refused.headers   # refused before the cache stage


async def test_a_redis_store_that_does_not_answer_is_a_bypass_never_an_error(autojump_clock):
    from tests.servers import free_port
    dead = f"redis://127.0.0.1:{free_port()}"
    async with gateway(config("{enabled: true, store: redis}", top=f"state: {{redis_url: '{dead}'}}\n")) as app:
        first = await call(app, ask())
        again = await call(app, ask())
    assert (first.status, again.status) == (200, 200)
    assert again.headers[b"x-continuum-cache"] == b"bypass"
    assert app.runtime.cache.bypasses["store_unavailable"] == 2
