"""What the caches save on a realistic mix: the semantic cache's hits and money, its latency, its CPU on a miss,
and what prompt-caching breakpoints save on Anthropic.

The in-process gateway (``tests/harness.py``'s ``gateway``/``request``: no sockets) on simulated backends with
per-token prices in their model metadata. Embeddings come from a simulated backend with ``embedding: words``
(one dimension per lower-cased word), so the cosine of two prompts is known and the paraphrases are placed
above or below ``--threshold`` on purpose. The mix (seeded): FAQ questions asked as they are, as close
paraphrases (one word changed) and far ones (three changed), under two long shared system prompts, and
multi-turn chats under a third. Four parts:

- (a) the mix through the semantic cache and with the cache off (virtual time): hit rate, the cost paid
  (client calls plus the embeddings' ``purpose: cache`` records) and saved (the ledger's ``saved_cost``);
- (b) latency in real time: a miss (the chat backend's ``--latency``), an exact hit, a semantic hit (one
  embeddings call of ``--embed-latency``), a call with the cache off;
- (c) the CPU a miss spends on the semantic lookup, the embeddings call aside: ``SemanticCache.probe`` with
  the embeddings call answering at once (the split, the namespace's key, the index search) plus the vector's
  insertion once the answer is stored, timed over many misses with the call's namespace filled to
  ``--entries`` vectors of 1,536 dimensions (the worst case: every entry in the call's namespace);
- (d) the chats and the shared-system-prompt calls to a native ``anthropic`` backend (its simulator keeps a
  prompt cache and reports reads and writes), ``prefix_routing.anthropic_cache_control_injection`` on and
  off: the input cost.

    python tests/perf/cache_savings.py [--seed 7] [--faq-calls 400] [--chats 20] [--entries 1000,10000]

numpy's BLAS runs on one thread here (``OPENBLAS_NUM_THREADS=1`` unless set), as docs/cache.md advises for
the gateway. Not a test: pytest does not collect ``tests/perf``.
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads

import argparse  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import trio  # noqa: E402
import trio.testing  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from switchyard.actors.cache import semantic as semantic_module  # noqa: E402
from switchyard.actors.cache.similarity import cosine  # noqa: E402
from switchyard.actors.ledger.record import UsageQuery  # noqa: E402
from switchyard.actors.messages import Call  # noqa: E402
from switchyard.config.load import load_text  # noqa: E402
from switchyard.protocol.simulated.endpoints import word_vector  # noqa: E402
from tests.harness import gateway, request  # noqa: E402

DIM = 1536
PRICES = {"chat": (2.5, 10.0), "embed": 0.02, "claude": (3.0, 15.0, 3.75, 0.3)}   # USD per 1M tokens

CONFIG = """
health_checks: {{interval: 1h}}
retry: {{max_attempts: 1}}
usage: {{ledger: memory}}
prefix_routing: {{anthropic_cache_control_injection: {injection}}}
backends:
  - name: chat
    type: simulated
    models: [gpt-sim]
    simulation: {{latency: {latency}, chunks: 4, text: "Open Settings, choose the item, and confirm: done."}}
    model_configs: [{{id: gpt-sim, metadata: {{pricing: {{input_tokens: {cp[0]}, output_tokens: {cp[1]}}}}}}}]
  - name: emb
    type: simulated
    models: [embed]
    simulation: {{latency: {embed_latency}, embedding: words}}
    model_configs: [{{id: embed, metadata: {{pricing: {{input_tokens: {ep}}}}}}}]
  - name: claude
    type: anthropic
    url: http://claude.simulated
    models: [claude-sim]
    simulation: {{latency: {latency}, chunks: 4}}
    model_configs:
      - {{id: claude-sim, metadata: {{pricing: {{input_tokens: {ap[0]}, output_tokens: {ap[1]},
                                              cache_write_input_tokens: {ap[2]}, cache_read_input_tokens: {ap[3]}}}}}}}
response_cache:
  enabled: {cache}
  semantic: {{enabled: {semantic}, embedding_model: embed, threshold: {threshold}, dimensions: {dim},
             max_entries: {max_entries}}}
"""


def config(*, cache: bool = True, semantic: bool = True, injection: bool = False, latency: str = "300ms",
           embed_latency: str = "30ms", threshold: float = 0.9, max_entries: int = 2000) -> str:
    return CONFIG.format(injection=str(injection).lower(), latency=latency, embed_latency=embed_latency,
                         cache=str(cache).lower(), semantic=str(semantic).lower(), threshold=threshold, dim=DIM,
                         max_entries=max_entries, cp=PRICES["chat"], ep=PRICES["embed"], ap=PRICES["claude"])


# --- the mix ------------------------------------------------------------------------------------------------

TOPICS = [("reset", "password"), ("cancel", "subscription"), ("change", "billing address"), ("export", "invoices"),
          ("enable", "two factor login"), ("delete", "old projects"), ("rename", "workspace"), ("upgrade", "plan"),
          ("download", "monthly report"), ("invite", "team members"), ("update", "payment card"),
          ("restore", "deleted files"), ("move", "files to another folder"), ("share", "dashboard"),
          ("merge", "duplicate contacts"), ("turn off", "email notifications"), ("connect", "calendar"),
          ("limit", "guest access"), ("recover", "locked account"), ("transfer", "ownership"),
          ("print", "shipping labels"), ("schedule", "weekly backups"), ("archive", "finished tasks"),
          ("add", "custom domain"), ("remove", "saved card"), ("verify", "phone number"), ("find", "api token"),
          ("set", "default currency"), ("change", "time zone"), ("close", "support ticket")]
CLOSE = {"how": "where"}                                             # one word changed
FAR = {"how": "where", "can": "do", "please": "quickly"}             # three words changed
SYSTEMS = [("You are the support assistant of Acme Cloud. Answer from the handbook, briefly and politely; "
            "never promise refunds; link the settings page when it helps. ") * 40,
           ("You are the help desk of Northwind Shop. Answer in plain words, name the menu path, and offer a "
            "human agent when the customer is upset. ") * 40]
CHAT_SYSTEM = ("You are a careful writing assistant for a legal team. Keep the firm's style guide: short "
               "sentences, defined terms in capitals, no Latin. ") * 40


def question(topic: tuple[str, str], form: str) -> str:
    verb, thing = topic
    words = f"how can I {verb} my {thing} in the account settings please".split()
    swap = {"exact": {}, "close": CLOSE, "far": FAR}[form]
    return " ".join(swap.get(w, w) for w in words)


def similarity(a: str, b: str) -> float:
    return cosine(word_vector(f"user: {a}", DIM), word_vector(f"user: {b}", DIM))


def faq_calls(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """FAQ traffic: Zipf-weighted questions (a few popular ones), each asked as it is (60 %), as a close
    paraphrase (25 %) or a far one (15 %), under one of the two shared system prompts."""
    weights = [1 / (i + 1) for i in range(len(TOPICS))]
    out = []
    for _ in range(n):
        topic = rng.choices(TOPICS, weights)[0]
        form = rng.choices(["exact", "close", "far"], [60, 25, 15])[0]
        system = SYSTEMS[rng.randrange(len(SYSTEMS))]
        out.append({"part": "faq", "form": form, "messages": [{"role": "system", "content": system},
                                                               {"role": "user", "content": question(topic, form)}]})
    return out


def chat_turns(rng: random.Random, chats: int) -> list[list[str]]:
    """Each chat's user turns (3 to 6), unique to it."""
    asks = ["draft a clause on {x}", "shorten the clause on {x}", "make the {x} clause stricter",
            "list the risks of the {x} clause", "rewrite it for a customer", "add a defined term for {x}"]
    subjects = ["late payment", "data retention", "termination", "liability caps", "audit rights", "subprocessors"]
    clients = ["Abbott", "Baker", "Castillo", "Dietrich", "Eriksen", "Fontaine", "Gupta", "Haddad", "Ivanova",
               "Jensen", "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov", "Quinn", "Rossi"]
    return [[rng.choice(asks).format(x=rng.choice(subjects)) + f" for {rng.choice(clients)} matter {c}-{t} "
             f"under {rng.choice(['german', 'french', 'english', 'dutch'])} law"
             for t in range(rng.randint(3, 6))] for c in range(chats)]


def interleave(rng: random.Random, faqs: list[dict[str, Any]], chats: list[list[str]]) -> list[Any]:
    """One stream of work: FAQ calls and chat turns, each chat's turns in order."""
    slots: list[Any] = list(faqs) + [("chat", c) for c, turns in enumerate(chats) for _ in turns]
    rng.shuffle(slots)
    return slots


async def run_mix(app: Any, model: str, work: list[Any], chats: list[list[str]],
                  parts: tuple[str, ...] = ("faq", "chat")) -> dict[str, int]:
    """Send the mix; count the answers by what the cache said. A chat's history grows with the answers."""
    history = {c: [{"role": "system", "content": CHAT_SYSTEM}] for c in range(len(chats))}
    turn = dict.fromkeys(range(len(chats)), 0)
    outcomes: dict[str, int] = {}
    for item in work:
        if isinstance(item, tuple):
            c = item[1]
            history[c].append({"role": "user", "content": chats[c][turn[c]]})
            turn[c] += 1
            messages, part = history[c], "chat"
        else:
            messages, part = item["messages"], "faq"
        if part not in parts:
            continue
        reply = await request(app, "POST", "/v1/chat/completions",
                              {"model": model, "temperature": 0, "max_tokens": 200, "messages": messages})
        assert reply.status == 200, reply.body
        if part == "chat":
            history[c].append({"role": "assistant", "content": reply.json()["choices"][0]["message"]["content"]})
        label = reply.headers.get(b"x-continuum-cache", b"off").decode()
        if label == "hit":
            label += "-" + reply.headers[b"x-continuum-cache-kind"].decode()
        key = f"{part}:{item['form']}:{label}" if part == "faq" else f"chat:{label}"
        outcomes[key] = outcomes.get(key, 0) + 1
    return outcomes


async def ledger(app: Any) -> list[Any]:
    await app.runtime.ledger.flush()
    return app.runtime.ledger.store.records(UsageQuery(purpose=None), 1_000_000)


def mix_in_virtual_time(cfg: str, model: str, work: list[Any], chats: list[list[str]],
                        parts: tuple[str, ...]) -> tuple[dict[str, int], list[Any]]:
    async def main() -> tuple[dict[str, int], list[Any]]:
        async with gateway(cfg) as app:
            outcomes = await run_mix(app, model, work, chats, parts)
            return outcomes, await ledger(app)
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# --- (a) hit rate and money ---------------------------------------------------------------------------------

def part_a(work: list[Any], chats: list[list[str]], threshold: float) -> dict[str, Any]:
    on, rec_on = mix_in_virtual_time(config(threshold=threshold), "gpt-sim", work, chats, ("faq", "chat"))
    off, rec_off = mix_in_virtual_time(config(cache=False), "gpt-sim", work, chats, ("faq", "chat"))
    client = [r for r in rec_on if r.purpose == "client"]
    embeds = [r for r in rec_on if r.purpose == "cache"]
    calls = sum(on.values())
    hits = {kind: sum(n for k, n in on.items() if k.endswith("hit-" + kind)) for kind in ("exact", "semantic")}
    paid_chat = sum(r.cost or 0 for r in client)
    paid_embed = sum(r.cost or 0 for r in embeds)
    return {"calls": calls, "outcomes": on, "hits": hits, "paid_chat": paid_chat, "paid_embed": paid_embed,
            "saved": sum(r.saved_cost or 0 for r in client), "off_cost": sum(r.cost or 0 for r in rec_off),
            "embed_calls": len(embeds), "off_calls": sum(off.values())}


# --- (b) latency --------------------------------------------------------------------------------------------

def part_b(pairs: int, latency: str, embed_latency: str, threshold: float) -> dict[str, list[float]]:
    """Real time: for each of ``pairs`` topics, a miss, its exact repeat, a close paraphrase (a semantic hit),
    and, on a gateway with the cache off, the same question."""
    times: dict[str, list[float]] = {"miss": [], "hit-exact": [], "hit-semantic": [], "cache off": []}
    system = SYSTEMS[0]

    async def ask(app: Any, text: str) -> tuple[str, float]:
        began = time.perf_counter()
        reply = await request(app, "POST", "/v1/chat/completions", {
            "model": "gpt-sim", "temperature": 0, "messages": [{"role": "system", "content": system},
                                                               {"role": "user", "content": text}]})
        took = (time.perf_counter() - began) * 1000
        label = reply.headers.get(b"x-continuum-cache", b"off").decode()
        return (label + "-" + reply.headers[b"x-continuum-cache-kind"].decode()) if label == "hit" else label, took

    async def main() -> None:
        async with gateway(config(latency=latency, embed_latency=embed_latency, threshold=threshold)) as app:
            await ask(app, "warm up the gateway once")
            for topic in TOPICS[:pairs]:
                for form, want in (("exact", "miss"), ("exact", "hit-exact"), ("close", "hit-semantic")):
                    label, took = await ask(app, question(topic, form))
                    assert label == want, (topic, form, label)
                    times[label].append(took)
        async with gateway(config(cache=False, latency=latency)) as app:
            await ask(app, "warm up the gateway once")
            for topic in TOPICS[:pairs]:
                times["cache off"].append((await ask(app, question(topic, "exact")))[1])
    trio.run(main)
    return times


# --- (c) the lookup's CPU on a miss -------------------------------------------------------------------------

def part_c(entries: int, misses: int, rounds: int) -> dict[str, float]:
    """µs of CPU per miss: the probe with an instant embedding (split, namespace key, index search), and the
    vector's insertion once the answer is stored (at the bound: one row in, the oldest out)."""
    snapshot = load_text(config(max_entries=entries), env={}).snapshot
    settings = snapshot.response_cache
    target = next(b for b in snapshot.backends if b.name == "chat")
    payload = {"model": "gpt-sim", "temperature": 0, "messages": [{"role": "system", "content": SYSTEMS[0]},
                                                                   {"role": "user", "content": question(TOPICS[0],
                                                                                                        "exact")}]}
    call = Call(model="gpt-sim", stream=False, body=b"{}", payload=payload, snapshot=snapshot)
    cache = semantic_module.SemanticCache(entries)
    rng = np.random.default_rng(1)
    vectors = iter(())   # fresh normal vectors: cosine near 0 to every row, so every lookup is a miss

    async def instant(*_: Any) -> list[float]:
        return next(vectors)

    class Actor:
        runtime = None

    semantic_module.embed = instant   # the embeddings call answers at once: its cost is left out
    results: dict[str, float] = {}

    async def main() -> None:
        nonlocal vectors
        vectors = iter([rng.standard_normal(DIM).tolist()])
        first = await cache.probe(Actor(), call, settings, None, "gpt-sim", target, None)
        assert first is not None and first.match is None
        fill = rng.standard_normal((entries, DIM)).astype(np.float32)
        for i in range(entries):
            cache.index.add(first.namespace, fill[i], i.to_bytes(8, "big"), 1e9)
        assert cache.index.entries == entries
        best_probe = best_add = float("inf")
        serial = entries
        for _ in range(rounds):
            vectors = iter(rng.standard_normal((misses, DIM)).tolist())
            probes = []
            began = time.process_time_ns()
            for _ in range(misses):
                probe = await cache.probe(Actor(), call, settings, None, "gpt-sim", target, None)
                probes.append(probe)
            best_probe = min(best_probe, (time.process_time_ns() - began) / misses / 1000)
            assert all(p is not None and p.match is None for p in probes)
            began = time.process_time_ns()
            for probe in probes:
                serial += 1
                cache.remember(probe, serial.to_bytes(8, "big"), 300.0)
            best_add = min(best_add, (time.process_time_ns() - began) / misses / 1000)
        assert cache.index.entries == entries and not cache.faults
        results.update(probe=best_probe, add=best_add)
    trio.run(main, clock=trio.testing.MockClock())
    return results


# --- (d) provider prompt caching ----------------------------------------------------------------------------

def part_d(work: list[Any], chats: list[list[str]]) -> dict[str, Any]:
    """The chats and the FAQ calls (both with long system prompts) to the anthropic backend, cache off."""
    out: dict[str, Any] = {}
    for injection in (False, True):
        cfg = config(cache=False, injection=injection)
        _, records = mix_in_virtual_time(cfg, "claude-sim", work, chats, ("faq", "chat"))
        out[injection] = records
    base_in, base_out, write_rate, read_rate = PRICES["claude"]
    on = out[True]
    tokens = sum(r.input_tokens for r in on)
    reads = sum(r.cached_tokens for r in on)
    writes = sum(r.cache_write_tokens for r in on)
    with_input = ((tokens - reads - writes) * base_in + reads * read_rate + writes * write_rate) / 1e6
    without_input = tokens * base_in / 1e6   # no marks: every prompt token at the input rate
    output = sum(r.output_tokens for r in on) * base_out / 1e6
    off_marks = sum(r.cached_tokens + r.cache_write_tokens for r in out[False])
    return {"calls": len(on), "tokens": tokens, "reads": reads, "writes": writes, "with": with_input,
            "without": without_input, "output": output, "ledger_with": sum(r.cost or 0 for r in on),
            "off_cache_tokens": off_marks}


# --- the report ---------------------------------------------------------------------------------------------

def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--faq-calls", type=int, default=400)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--latency", default="300ms", help="the chat backends' simulated latency")
    parser.add_argument("--embed-latency", default="30ms", help="the embeddings backend's, in part (b)")
    parser.add_argument("--pairs", type=int, default=20, help="(b): topics timed")
    parser.add_argument("--entries", default="1000,10000", help="(c): vectors in the call's namespace")
    parser.add_argument("--misses", type=int, default=500, help="(c): misses timed per round")
    parser.add_argument("--rounds", type=int, default=7, help="(c): rounds, the best one counts")
    parser.add_argument("--parts", default="abcd")
    args = parser.parse_args()

    close, far = similarity(question(TOPICS[0], "exact"), question(TOPICS[0], "close")), \
        similarity(question(TOPICS[0], "exact"), question(TOPICS[0], "far"))
    assert far < args.threshold <= close, (close, far)
    rng = random.Random(args.seed)
    faqs = faq_calls(rng, args.faq_calls)
    chats = chat_turns(rng, args.chats)
    work = interleave(rng, faqs, chats)
    print(f"mix: {len(faqs)} FAQ calls ({len(TOPICS)} questions, 2 system prompts of ~{len(SYSTEMS[0]) // 4} "
          f"tokens), {args.chats} chats ({sum(map(len, chats))} turns); threshold {args.threshold}: close "
          f"paraphrase {close:.3f}, far {far:.3f}; seed {args.seed}")

    if "a" in args.parts:
        a = part_a(work, chats, args.threshold)
        paid = a["paid_chat"] + a["paid_embed"]
        print(f"\n(a) semantic cache on the mix ({a['calls']} calls)")
        print("| outcome | calls |\n|---|---|")
        for k in sorted(a["outcomes"]):
            print(f"| {k} | {a['outcomes'][k]} |")
        hit = a["hits"]["exact"] + a["hits"]["semantic"]
        print(f"| hit rate | {hit / a['calls']:.1%} (exact {a['hits']['exact'] / a['calls']:.1%}, semantic "
              f"{a['hits']['semantic'] / a['calls']:.1%}) |")
        print(f"| cost with the cache off | ${a['off_cost']:.4f} |")
        print(f"| cost with it on: chat calls + {a['embed_calls']} embeddings (purpose cache) | "
              f"${a['paid_chat']:.4f} + ${a['paid_embed']:.6f} = ${paid:.4f} |")
        print(f"| saved_cost in the ledger | ${a['saved']:.4f} |")
        print(f"| net saving (off - on) | ${a['off_cost'] - paid:.4f} ({(a['off_cost'] - paid) / a['off_cost']:.1%}) |")

    if "b" in args.parts:
        b = part_b(args.pairs, args.latency, args.embed_latency, args.threshold)
        print(f"\n(b) latency, real time (chat backend {args.latency}, embeddings {args.embed_latency}), ms")
        print("| call | n | p50 | p90 |\n|---|---|---|---|")
        for k, v in b.items():
            print(f"| {k} | {len(v)} | {statistics.median(v):.1f} | {pct(v, 0.9):.1f} |")

    if "c" in args.parts:
        print(f"\n(c) CPU of the semantic lookup per miss, embeddings call aside, µs (best of {args.rounds} "
              f"rounds of {args.misses} misses, {DIM} dimensions, BLAS threads "
              f"{os.environ['OPENBLAS_NUM_THREADS']})")
        print("| entries in the namespace | probe (split, key, search) | insert on store | total | target |")
        print("|---|---|---|---|---|")
        for n in (int(x) for x in args.entries.split(",")):
            c = part_c(n, args.misses, args.rounds)
            total = c["probe"] + c["add"]
            print(f"| {n:,} | {c['probe']:.0f} | {c['add']:.0f} | {total:.0f} | "
                  f"{'met' if total <= 1000 else 'missed'} (≤ 1,000) |")

    if "d" in args.parts:
        d = part_d(work, chats)
        saved = d["without"] - d["with"]
        print(f"\n(d) anthropic prompt caching on the same mix, response cache off ({d['calls']} calls)")
        print("| | input tokens | cache reads | cache writes | input cost |\n|---|---|---|---|---|")
        print(f"| injection off | {d['tokens']:,} | 0 | 0 | ${d['without']:.4f} |")
        print(f"| injection on | {d['tokens']:,} | {d['reads']:,} | {d['writes']:,} | ${d['with']:.4f} |")
        print(f"saving: ${saved:.4f} of input ({saved / d['without']:.1%}); output ${d['output']:.4f} either way; "
              f"ledger total with injection ${d['ledger_with']:.4f}; cache tokens with injection off: "
              f"{d['off_cache_tokens']}")


if __name__ == "__main__":
    main()
