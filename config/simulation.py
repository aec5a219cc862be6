"""``backends[].simulation``: what an in-process simulated backend does, each field with its rule.

Only for demos and tests; the simulators live in ``protocol/simulated``.
Some rules span fields and run as checks: ``retry_after`` and ``error_code``
need a ``status``, ``when_body_contains`` a failure mode to narrow, an
engine's ``total_slots`` is an SGLang metric, and ``engine_kv`` (the engine's
own queue, KV cache and pace) reports and paces what ``engine`` and
``tokens_per_second`` would otherwise script.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import attrs
from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field, section
from switchyard.config.rules import Invalid, Reader, child

_STATUS = rules.integer(100, 599)
_CHUNK_NO = rules.integer(1, 100_000)  # chunks count from 1


def _retry_after(value: Any) -> str | int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise Invalid(f"must be a number of seconds or an HTTP date, got {rules.type_name(value)}")
    if isinstance(value, int):
        rules.integer(0, 86_400 * 365)(value)
        return value
    return rules.string()(value.strip())


def _header_map(value: Any) -> dict[str, str]:
    """Header name -> value, both strings (numbers are written as they are)."""
    if not isinstance(value, dict):
        raise Invalid(f"must be a mapping of header names to values, got {rules.type_name(value)}")
    out = {}
    for name, v in value.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name):
            raise Invalid(f"has {name!r}, which is not an HTTP header name")
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise Invalid(f"[{name}] must be a string or number, got {rules.type_name(v)}")
        out[name.lower()] = str(v)
    return out


@frozen
class SimulatedFailure:
    """What a simulated backend does wrong, for demos and tests."""

    status: int | None = field(None, _STATUS)
    stall_before_first_byte: bool = field(False, rules.boolean)
    stall_after_chunk: int | None = field(None, _CHUNK_NO)
    reset_after_chunk: int | None = field(None, _CHUNK_NO)
    malformed_chunk: int | None = field(None, _CHUNK_NO)
    retry_after: str | int | None = field(None, _retry_after)     # Retry-After header sent with `status`
    # `code` of the error body sent with `status`
    error_code: str | None = field(None, rules.string(r"[A-Za-z0-9_.:-]{1,128}",
                                                      "1-128 letters, digits, '_', '.', ':' or '-'"))
    # in-band {"error": ...} event after chunk k, then end
    error_event_after_chunk: int | None = field(None, _CHUNK_NO)
    omit_done: bool = field(False, rules.boolean)              # end after the finish_reason chunk, no [DONE]
    # end cleanly after chunk k: no finish_reason, no [DONE]
    truncate_after_chunk: int | None = field(None, _CHUNK_NO)
    empty_reply: bool = field(False, rules.boolean)            # empty content, finish_reason stop
    tool_call: bool = field(False, rules.boolean)              # one get_weather tool call instead of text
    # the failure hits only requests whose body holds this text (as sent: JSON-escaped); the others are served
    when_body_contains: str | None = field(None, rules.string())


def _check_failure(failure: SimulatedFailure, r: Reader) -> None:
    for key in ("retry_after", "error_code"):
        if r.has(key) and not r.has("status"):
            r.problems.error(child(r.path, key), "only applies together with status")
    if failure.empty_reply and failure.tool_call:
        r.problems.error(child(r.path, "tool_call"), "cannot be combined with empty_reply")
    if r.has("when_body_contains") and attrs.evolve(failure, when_body_contains=None) == SimulatedFailure():
        r.problems.error(child(r.path, "when_body_contains"), "only applies together with a failure mode")


@frozen
class SimulatedEngine:
    """``simulation.engine``: the backend also answers ``GET .../metrics`` as a vLLM or SGLang engine would.

    The generation counter grows with the tokens the simulator streams plus
    ``background_tokens_per_second`` (what the engine generates for others).
    """

    kind: str = field("vllm", values.words("vllm", "sglang"))   # whose metric names the page uses
    waiting: int = field(0, rules.integer(0, 1_000_000))        # requests in the engine's queue
    # running requests besides the ones this simulator streams now
    running: int = field(0, rules.integer(0, 1_000_000))
    kv_cache_usage: float = field(0.0, rules.number(0, 1))
    # sglang:max_running_requests (vLLM reports no cap)
    total_slots: int | None = field(None, rules.integer(1, 1_000_000))
    background_tokens_per_second: float = field(0.0, rules.number(0, 10_000_000))


def _check_engine(engine: SimulatedEngine, r: Reader) -> None:
    if engine.total_slots is not None and engine.kind != "sglang":
        r.problems.error(child(r.path, "total_slots"), "only an sglang engine reports it (vLLM exports no such metric)")


@frozen
class EngineKv:
    """``simulation.engine_kv``: the backend serves chat and completions as a prefix-caching engine would.

    The prompt (the simulated tokenizer's ids) is cut into blocks; the leading
    blocks the cache holds are hits, the rest are prefilled one request after
    another at ``prefill_tokens_per_second``, then the answer is decoded at
    ``decode_tokens_per_second``; least recently used free blocks are evicted
    when the cache is full (``protocol/simulated/kv_engine.py``).
    """

    blocks: int = field(4096, rules.integer(1, 10_000_000))          # the KV cache's size, in blocks
    block_size: int = field(16, rules.integer(1, 4096))              # tokens per block (vLLM's --block-size)
    prefill_tokens_per_second: float = field(10_000.0, rules.number(1, 1e9))
    decode_tokens_per_second: float = field(50.0, rules.number(1, 1e9))   # per request
    # publish its KV events (blocks stored, removed, all cleared) to in-process listeners, in vLLM's shapes
    events: bool = field(False, rules.boolean)


def check_simulation(sim: "Simulation", r: Reader) -> None:
    """``engine_kv`` paces decoding and reports the queue and the cache: the keys that would script them are refused."""
    if sim.engine_kv is None:
        return
    if sim.tokens_per_second:
        r.problems.error(child(r.path, "tokens_per_second"),
                         "cannot be combined with engine_kv: its decode_tokens_per_second paces the answer")
    if sim.engine is not None:
        for key in ("waiting", "running", "kv_cache_usage"):
            if getattr(sim.engine, key):
                r.problems.error(child(child(r.path, "engine"), key),
                                 "cannot be combined with engine_kv: the engine model reports its own")


@frozen
class Simulation:
    # Fields are read in this order, so the failure's problems are listed first.
    failure: SimulatedFailure = section(SimulatedFailure, check=_check_failure)
    latency: float = field(0.05, rules.duration(maximum=3600, allow_zero=True))
    # requests served at once (an engine's capacity); past it they wait their turn in arrival order; 0: no limit
    max_concurrency: int = field(0, rules.integer(0, 1_000_000))
    tokens_per_second: float = field(0.0, rules.number(0, 1_000_000))
    chunks: int = field(8, rules.integer(1, 100_000))
    health_status: int = field(200, _STATUS)
    # the reply, split into `chunks` pieces; None: "Hello from NAME. ..."
    text: str | None = field(None, rules.string())
    # with failure.tool_call: the call's arguments (default a fixed JSON)
    tool_arguments: str | None = field(None, rules.string())
    # a chat or Responses request offering function tools gets a call to one (tool_choice's, else the first),
    # unless it ends with a tool's output (with failure.tool_call: even then): the demo's model uses the tools
    # it is given; without tool_arguments a chat call's required string arguments are the last user message
    call_tools: bool = field(False, rules.boolean)
    # with call_tools: the name that call gives, whatever tools were offered (a model calling a tool it was not
    # given); None: the offered tool's (chat)
    tool_name: str | None = field(None, rules.string())
    tool_calls: int = field(1, rules.integer(1, 16))   # calls in an answer that makes tool calls (chat)
    supports_prefill: bool = field(True, rules.boolean)   # continue a trailing assistant message (else answer 400)
    # take `stream_options` (else answer 400 naming it, as some OpenAI-compatible servers do)
    supports_stream_options: bool = field(True, rules.boolean)
    # an engine Prometheus page on GET .../metrics
    engine: SimulatedEngine | None = section(SimulatedEngine, optional=True, check=_check_engine)
    # an engine's queue (max_concurrency), prefix-cached KV cache, prefill and decode (and its engine page)
    engine_kv: EngineKv | None = section(EngineKv, optional=True)
    # embeddings: `hash` (a vector per exact input) or `words` (counts of the lower-cased words, each word
    # hashed to one dimension: texts sharing words have a known cosine; the tests' controllable embedding)
    embedding: str = field("hash", values.words("hash", "words"))
    # embeddings: answer vectors of this length whatever the request asks (a backend of the wrong size)
    embedding_size: int | None = field(None, rules.integer(1, 65_536))
    # moderations: an input holding one of these words (lower-cased, whole words) is flagged in
    # `moderation_category`, with score 1.0 there (0.0 everywhere else, and for every other input)
    moderation_words: tuple[str, ...] = field(("kill", "bomb"), rules.string_list(rules.string()))
    moderation_category: str = field("violence", rules.string())
    # added to every chat answer (rate limits)
    response_headers: Mapping[str, str] = field(attrs.Factory(dict), _header_map)
