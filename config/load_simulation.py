"""``backends[].simulation``: what an in-process simulated backend does, validated."""

from __future__ import annotations

import re
from typing import Any

from switchyard.config import rules
from switchyard.config.rules import Invalid, Reader, child
from switchyard.config.schema import SimulatedEngine, SimulatedFailure, Simulation


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


def _status(value: Any) -> int:
    return rules.integer(100, 599)(value)


def simulation(r: Reader) -> Simulation:
    d = Simulation()
    f = r.section("failure")
    chunk_no = rules.integer(1, 100_000)  # chunks count from 1

    def retry_after(value: Any) -> str | int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise Invalid(f"must be a number of seconds or an HTTP date, got {rules.type_name(value)}")
        if isinstance(value, int):
            rules.integer(0, 86_400 * 365)(value)
            return value
        return rules.string()(value.strip())

    failure = SimulatedFailure(
        status=f.get("status", _status, None),
        stall_before_first_byte=f.get("stall_before_first_byte", rules.boolean, False),
        stall_after_chunk=f.get("stall_after_chunk", chunk_no, None),
        reset_after_chunk=f.get("reset_after_chunk", chunk_no, None),
        malformed_chunk=f.get("malformed_chunk", chunk_no, None),
        retry_after=f.get("retry_after", retry_after, None),
        error_code=f.get("error_code", rules.string(r"[A-Za-z0-9_.:-]{1,128}",
                                                    "1-128 letters, digits, '_', '.', ':' or '-'"), None),
        error_event_after_chunk=f.get("error_event_after_chunk", chunk_no, None),
        omit_done=f.get("omit_done", rules.boolean, False),
        truncate_after_chunk=f.get("truncate_after_chunk", chunk_no, None),
        empty_reply=f.get("empty_reply", rules.boolean, False),
        tool_call=f.get("tool_call", rules.boolean, False),
    )
    for key in ("retry_after", "error_code"):
        if f.has(key) and not f.has("status"):
            f.problems.error(child(f.path, key), "only applies together with status")
    if failure.empty_reply and failure.tool_call:
        f.problems.error(child(f.path, "tool_call"), "cannot be combined with empty_reply")
    f.finish()
    engine = r.section("engine")   # read even when null, so `engine:` alone is no unknown key
    out = Simulation(
        latency=r.get("latency", rules.duration(maximum=3600, allow_zero=True), d.latency),
        tokens_per_second=r.get("tokens_per_second", rules.number(0, 1_000_000), d.tokens_per_second),
        chunks=r.get("chunks", rules.integer(1, 100_000), d.chunks),
        health_status=r.get("health_status", _status, d.health_status),
        failure=failure,
        text=r.get("text", rules.string(), d.text),
        tool_arguments=r.get("tool_arguments", rules.string(), d.tool_arguments),
        supports_prefill=r.get("supports_prefill", rules.boolean, d.supports_prefill),
        response_headers=r.get("response_headers", _header_map, {}),
        engine=_simulated_engine(engine) if r.has("engine") else None,
    )
    r.finish()
    return out


def _simulated_engine(r: Reader) -> SimulatedEngine:
    d = SimulatedEngine()
    out = SimulatedEngine(
        kind=r.get("kind", rules.one_of({"vllm": "vllm", "sglang": "sglang"}), d.kind),
        waiting=r.get("waiting", rules.integer(0, 1_000_000), d.waiting),
        running=r.get("running", rules.integer(0, 1_000_000), d.running),
        kv_cache_usage=r.get("kv_cache_usage", rules.number(0, 1), d.kv_cache_usage),
        total_slots=r.get("total_slots", rules.integer(1, 1_000_000), d.total_slots),
        background_tokens_per_second=r.get("background_tokens_per_second", rules.number(0, 10_000_000),
                                           d.background_tokens_per_second),
    )
    if out.total_slots is not None and out.kind != "sglang":
        r.problems.error(child(r.path, "total_slots"),
                         "only an sglang engine reports it (vLLM exports no such metric)")
    r.finish()
    return out
