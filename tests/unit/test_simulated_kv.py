"""The simulated engine model (``simulation.engine_kv``) at exact virtual instants, driven through httpx."""

from __future__ import annotations

import attrs
import httpx
import pytest
import trio

from switchyard.actors.kv.events import AllBlocksCleared, BlockRemoved, BlockStored, EventBatch
from switchyard.actors.kv.sim_tokens import SimulatedTokenizer, encode
from switchyard.actors.routing.engine_metrics import parse_exposition
from switchyard.config.load import ConfigError, load_text
from switchyard.config.simulation import EngineKv, SimulatedEngine, Simulation
from switchyard.protocol.simulated.openai import SimulatedTransport

# prefill 100 tokens/s; "Hi there friend" in 3 pieces of 1, 2 and 2 tokens, decoded at 10 tokens/s
KV = EngineKv(blocks=64, block_size=4, prefill_tokens_per_second=100, decode_tokens_per_second=10, events=True)
SIM = Simulation(latency=0, text="Hi there friend", chunks=3, engine_kv=KV, engine=SimulatedEngine())
DECODE = 0.4


def messages(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def tokens(text: str) -> int:
    return len(SimulatedTokenizer().chat(messages(text)))


def engine(sim: Simulation = SIM) -> tuple[httpx.AsyncClient, SimulatedTransport, list[EventBatch]]:
    transport = SimulatedTransport("e", sim, ("m",))
    batches: list[EventBatch] = []
    transport.kv.listeners.append(batches.append)
    return httpx.AsyncClient(transport=transport, base_url="http://e.simulated"), transport, batches


async def ask(http: httpx.AsyncClient, text: str) -> tuple[float, float, float]:
    """(sent, first chunk, end) instants of one streamed chat call."""
    sent, first = trio.current_time(), None
    body = {"model": "m", "stream": True, "messages": messages(text)}
    async with http.stream("POST", "/v1/chat/completions", json=body) as reply:
        assert reply.status_code == 200
        async for _ in reply.aiter_bytes():
            first = first if first is not None else trio.current_time()
    return sent, first, trio.current_time()


async def test_a_repeated_prompt_waits_only_for_its_uncached_tokens(autojump_clock):
    http, _, _ = engine()
    n = tokens("alpha beta gamma delta")   # 20: five full blocks
    sent, first, end = await ask(http, "alpha beta gamma delta")
    assert (first - sent, end - first) == (pytest.approx(n / 100), pytest.approx(DECODE))
    sent, first, _ = await ask(http, "alpha beta gamma delta")
    assert first - sent == pytest.approx(4 / 100)   # four blocks cached; the last one holds the last token
    sent, first, _ = await ask(http, "alpha beta gamma epsilon")   # shares the first 12 tokens: three blocks
    assert first - sent == pytest.approx((n - 12) / 100)


async def test_prefills_run_one_at_a_time_and_past_max_concurrency_calls_wait_in_order(autojump_clock):
    http, _, _ = engine(attrs.evolve(SIM, max_concurrency=2))
    p = tokens("one two three four") / 100
    firsts: dict[int, float] = {}

    async def one(i: int) -> None:
        firsts[i] = (await ask(http, f"w{i} two three four"))[1]

    async with trio.open_nursery() as nursery:
        for i in range(3):
            nursery.start_soon(one, i)
            await trio.sleep(0.001)
    t0 = min(firsts.values()) - p
    again = p - 4 / 100   # the template's first block ("<|user") is cached by then
    # 0 prefills; 1 prefills after it; 2 waits for a slot: 0's, free once its answer is decoded
    assert firsts[0] - t0 == pytest.approx(p)
    assert firsts[1] - t0 == pytest.approx(p + again)
    assert firsts[2] - t0 == pytest.approx(p + DECODE + again)


async def test_the_least_recently_used_free_blocks_are_evicted_when_the_cache_is_full(autojump_clock):
    kv = attrs.evolve(KV, blocks=5)          # one prompt's five blocks
    http, transport, batches = engine(attrs.evolve(SIM, engine_kv=kv))
    n = tokens("alpha beta gamma delta")
    await ask(http, "alpha beta gamma delta")
    a_keys = transport.kv.cache.keys(SimulatedTokenizer().chat(messages("alpha beta gamma delta")))
    await ask(http, "zeta eta theta iota")   # the first block (its template) is shared; four evicted for the rest
    removed = [h for b in batches for e in b.events if isinstance(e, BlockRemoved) for h in e.block_hashes]
    assert set(removed) == set(a_keys[1:])
    sent, first, _ = await ask(http, "alpha beta gamma delta")
    assert first - sent == pytest.approx((n - 4) / 100)   # only the shared first block is still there


async def test_the_engine_page_reports_the_queue_the_cache_and_its_hits(autojump_clock):
    http, transport, _ = engine(attrs.evolve(SIM, max_concurrency=1))
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(ask, http, "alpha beta gamma delta")
        await trio.sleep(0.05)   # the first is prefilling, two wait for its slot
        page = (await http.get("/metrics")).text
        snap = parse_exposition(page, 0.0)
        assert (snap.engine, snap.running, snap.waiting) == ("vllm", 1, 2)
        assert snap.kv_cache_usage == pytest.approx(5 / 64)
    page = (await http.get("/metrics")).text
    n = tokens("alpha beta gamma delta")
    assert f'vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {3 * n:.1f}' in page
    assert f'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {2 * 16:.1f}' in page
    assert parse_exposition(page, 1.0).kv_cache_usage == 0.0   # nothing runs: every block is free
    assert transport.kv.hits == 32


async def test_stores_and_evictions_are_published_as_vllm_batches(autojump_clock):
    http, transport, batches = engine()
    ids = SimulatedTokenizer().chat(messages("alpha beta gamma delta"))
    sent, first, end = await ask(http, "alpha beta gamma delta")
    answer = encode("Hi there friend")   # 5 tokens: with the prompt's 20, a sixth full block
    keys = transport.kv.cache.keys(ids + answer)
    assert batches == [
        EventBatch(seq=0, ts=sent, data_parallel_rank=0, events=(
            BlockStored(block_hashes=tuple(keys[:5]), parent_block_hash=None, token_ids=tuple(ids),
                        block_size=4, medium="GPU"),)),
        EventBatch(seq=1, ts=end, data_parallel_rank=0, events=(
            BlockStored(block_hashes=(keys[5],), parent_block_hash=keys[4], token_ids=tuple(answer[:4]),
                        block_size=4, medium="GPU"),)),
    ]


async def test_keys_are_the_engines_own_and_only_published_when_asked(autojump_clock):
    http, transport, batches = engine(attrs.evolve(SIM, engine_kv=attrs.evolve(KV, events=False)))
    await ask(http, "alpha beta gamma delta")
    assert batches == [] and transport.kv.seq == 0
    assert transport.kv.cache.cached == 6   # the prompt's five blocks and the answer's


async def test_a_new_block_size_clears_the_cache_and_a_restart_numbers_batches_from_zero(autojump_clock):
    http, transport, batches = engine()
    await ask(http, "alpha beta gamma delta")
    transport.simulation = attrs.evolve(SIM, engine_kv=attrs.evolve(KV, block_size=8))   # a reload
    await ask(http, "alpha beta gamma delta")
    assert batches[2].events[0] == AllBlocksCleared() and batches[2].seq == 2
    assert all(b.events[0].block_size == 8 for b in batches[3:])
    transport.kv.restart()   # as vLLM: an empty cache, no AllBlocksCleared, numbering from 0 again
    sent, first, _ = await ask(http, "alpha beta gamma delta")
    assert first - sent == pytest.approx(tokens("alpha beta gamma delta") / 100)
    assert batches[-2].seq == 0 and not isinstance(batches[-2].events[0], AllBlocksCleared)


def errors_of(simulation: str, type_: str = "simulated", url: str = "") -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_text(f"backends:\n  - name: s\n    type: {type_}\n{url}    models: [m]\n    simulation: {simulation}\n")
    return caught.value.errors


def test_engine_kv_settings_are_checked_by_path():
    assert load_text("backends:\n  - {name: s, type: simulated, models: [m], simulation: {engine_kv: {}}}\n"
                     ).snapshot.backends[0].simulation.engine_kv == EngineKv()
    assert errors_of("{engine_kv: {block_size: 0, prefill_tokens_per_second: 0}}") == [
        "backends[0].simulation.engine_kv.block_size: must be at least 1, got 0",
        "backends[0].simulation.engine_kv.prefill_tokens_per_second: must be at least 1, got 0"]
    assert errors_of("{tokens_per_second: 20, engine_kv: {}}") == [
        "backends[0].simulation.tokens_per_second: cannot be combined with engine_kv: its "
        "decode_tokens_per_second paces the answer"]
    assert errors_of("{engine: {waiting: 3}, engine_kv: {}}") == [
        "backends[0].simulation.engine.waiting: cannot be combined with engine_kv: the engine model reports its own"]
    assert errors_of("{engine_kv: {}}", "anthropic", "    url: http://claude.simulated\n") == [
        "backends[0].simulation.engine_kv: is only allowed on backends of type simulated"]


async def test_the_model_reports_on_an_sglang_page_too_and_no_page_without_an_engine(autojump_clock):
    http, _, _ = engine(attrs.evolve(SIM, engine=SimulatedEngine(kind="sglang")))
    await ask(http, "alpha beta gamma delta")
    await ask(http, "alpha beta gamma delta")
    page = (await http.get("/metrics")).text
    assert 'sglang:cache_hit_rate{model_name="m"} 0.4' in page   # 16 of 40 tokens
    http, _, _ = engine(attrs.evolve(SIM, engine=None))
    assert (await http.get("/metrics")).json() == {"status": "ok"}   # the health route, as without engine_kv
