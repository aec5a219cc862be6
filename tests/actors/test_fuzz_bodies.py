"""Malformed and wrong-typed bodies on every door and the admin API: never a 5xx from the gateway, never
a traceback logged at error level, and a 4xx names the field it is about.

One in-process gateway (real clock, simulated backends with no latency) serves a synchronous
hypothesis run in a worker thread; each example calls back into the loop. Bounded in examples and
derandomized, so it is fast and the same on every run.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any, Iterator

import attrs
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switchyard.protocol.http.client_json import MAX_DEPTH
from tests.harness import Reply, gateway, request

TOKEN = "admin-token-0123456789"
ADMIN = [(b"authorization", f"Bearer {TOKEN}".encode())]
CONFIG = f"""
admin: {{token: {TOKEN}}}
health_checks: {{enabled: false}}
retry: {{max_attempts: 1}}
global_prompts: {{prompts_dir: ./prompts}}
backends:
  - name: sim
    type: simulated
    models: [demo]
    simulation: {{latency: 0ms, chunks: 2}}
  - name: claude
    type: anthropic
    url: http://claude.simulated
    models: [claude]
    simulation: {{latency: 0ms, chunks: 2}}
smart_routing:
  enabled: true
  model_profiles: [{{model: demo, tier: 1}}]
  routing_policies: [{{name: all, when: {{}}, route_to: {{tier: 1}}}}]
"""
USER = {"role": "user", "content": "hi"}
RICH_CHAT = {"model": "demo", "stream": True, "stream_options": {"include_usage": True},
             "messages": [{"role": "system", "content": "Be brief."},
                          {"role": "user", "content": [{"type": "text", "text": "hi"},
                                                       {"type": "image_url", "image_url": {"url": "data:,x"}}]},
                          {"role": "assistant", "content": [{"type": "text", "text": "Hel"}]}],
             "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                 "type": "object", "properties": {"a": {"type": "string"}}}}}],
             "tool_choice": "auto", "response_format": {"type": "json_object"}, "metadata": {"k": "v"}}
RICH_MESSAGES = {"model": "claude", "max_tokens": 100, "stream": True, "system": [{"type": "text", "text": "s"}],
                 "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                              {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                                                 "input": {"a": 1}}]},
                              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                            "content": "ok"}]}],
                 "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
                 "stop_sequences": ["zz"], "metadata": {"user_id": "u"}}
RICH_RESPONSES = {"model": "demo", "stream": True, "instructions": "Be brief.",
                  "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                  "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
                  "reasoning": {"effort": "low"}, "text": {"format": {"type": "text"}}, "metadata": {"k": "v"}}


@attrs.frozen
class Target:
    method: str
    path: str
    base: dict[str, Any]
    fields: tuple[str, ...]      # what a mutation may replace or add
    admin: bool = False
    rich: dict[str, Any] | None = None   # a valid body using more of the API, mutated anywhere inside

    @property
    def anthropic(self) -> bool:
        return self.path.startswith("/anthropic/")


CHAT_FIELDS = ("model", "messages", "stream", "stream_options", "user", "metadata", "tools", "tool_choice",
               "max_tokens", "temperature", "n", "stop", "response_format", "provider", "preset")
ANTHROPIC_FIELDS = ("model", "messages", "max_tokens", "system", "stream", "metadata", "tools", "tool_choice",
                    "thinking", "stop_sequences", "temperature", "top_k")
TARGETS = (
    Target("POST", "/v1/chat/completions", {"model": "demo", "messages": [USER]}, CHAT_FIELDS, rich=RICH_CHAT),
    Target("POST", "/v1/completions", {"model": "demo", "prompt": "hi"},
           ("model", "prompt", "stream", "stream_options", "user", "max_tokens", "echo", "suffix")),
    Target("POST", "/v1/embeddings", {"model": "demo", "input": "hi"},
           ("model", "input", "dimensions", "encoding_format", "user", "stream"),
           rich={"model": "demo", "input": ["a", "b"], "dimensions": 4, "encoding_format": "base64"}),
    Target("POST", "/v1/responses", {"model": "demo", "input": "hi"},
           ("model", "input", "instructions", "reasoning", "text", "tools", "tool_choice", "metadata", "stream",
            "max_output_tokens", "previous_response_id", "user"), rich=RICH_RESPONSES),
    Target("POST", "/anthropic/v1/messages", {"model": "demo", "max_tokens": 10, "messages": [USER]},
           ANTHROPIC_FIELDS),
    Target("POST", "/anthropic/v1/messages", {"model": "claude", "max_tokens": 10, "messages": [USER]},
           ANTHROPIC_FIELDS, rich=RICH_MESSAGES),
    Target("POST", "/anthropic/v1/messages", {"model": "demo", "max_tokens": 10, "messages": [USER]},
           ANTHROPIC_FIELDS, rich={**RICH_MESSAGES, "model": "demo"}),
    Target("POST", "/anthropic/v1/messages/count_tokens", {"model": "demo", "messages": [USER]}, ANTHROPIC_FIELDS),
    Target("PUT", "/admin/config/prompts/prompts/fuzz.md", {"content": "x"}, ("content",), admin=True),
    Target("POST", "/admin/smart-routing/simulate", {"payload": {"messages": [USER]}},
           ("payload", "key_tier", "org", "headers"), admin=True,
           rich={"payload": {"model": "auto", "messages": [USER]}, "key_tier": "gold", "org": "o",
                 "headers": {"x-route-hint": "thorough"}}),
    Target("PUT", "/admin/smart-routing/model-profiles", {"model_profiles": [{"model": "demo", "tier": 1}]},
           ("model_profiles",), admin=True,
           rich={"model_profiles": [{"model": "demo", "tier": 1, "domains": ["code"],
                                     "cost_per_1k_input_tokens": 0.1}]}),
    Target("PUT", "/admin/smart-routing/policies",
           {"routing_policies": [{"name": "all", "when": {}, "route_to": {"tier": 1}}]},
           ("routing_policies",), admin=True,
           rich={"routing_policies": [{"name": "p", "when": {"input_tokens": {"gt": 10}, "domain": ["code"],
                                                             "header": {"x-h": ["v"]}},
                                       "route_to": {"tier": 1, "prefer_domains": ["code"]}}]}),
)

HOSTILE = st.sampled_from(["\ud800", "a\udfffb\ud800", "", "\x00", "[{", "\u00e9\u2028", "x" * 5000, "demo"])
TEXTS = st.text(max_size=8) | HOSTILE | st.sampled_from(["user", "text", "auto", "function"])   # no other model
SCALARS = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | TEXTS)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
                      max_leaves=8)
PARTS = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "tool_use", "x"]),
                                        "text": VALUES}), max_size=2)
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool", "x"]),
                                           "content": VALUES | PARTS}), min_size=1, max_size=3)


@attrs.frozen
class Case:
    target: Target
    field: str | None            # None: the body is not JSON of the target's shape at all
    body: bytes


def nodes(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside ``value`` (not ``value`` itself)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        yield (*at, key)
        yield from nodes(inner, (*at, key))


def _with(base: dict[str, Any], path: tuple[Any, ...], raw: bytes) -> bytes:
    """``base`` with the value at ``path`` (a new key when it has none) replaced by the JSON text ``raw``."""
    body = copy.deepcopy(base)
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = "\x00HERE"
    return json.dumps(body).encode().replace(b'"\\u0000HERE"', raw)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    target = draw(st.sampled_from(TARGETS))
    kind = draw(st.sampled_from(["value", "value", "messages", "deep", "raw", "inside", "inside", "text"]))
    if kind == "raw":
        valid = json.dumps(target.base).encode()
        raw = draw(st.binary(max_size=40) | st.integers(0, len(valid) - 1).map(lambda n: valid[:n]))
        return Case(target, None, raw)
    if kind in ("inside", "text") and target.rich is not None:
        base = target.rich
        path = draw(st.sampled_from(list(nodes(base))))
    else:
        base, path = target.base, (draw(st.sampled_from(target.fields)),)
    if kind == "deep":
        depth = draw(st.integers(MAX_DEPTH - 2, 1500))
        raw = b"[" * depth + b"]" * depth
    elif kind == "text":
        raw = json.dumps(draw(HOSTILE)).encode()
    else:
        raw = json.dumps(draw(MESSAGES if kind == "messages" else VALUES)).encode()
    return Case(target, str(path[0]), _with(base, path, raw))


class ErrorTracebacks(logging.Handler):
    """Every record at error level or above that carries a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


def named(reply: Reply, case: Case) -> bool:
    """Whether the 4xx ``reply`` names the field the case changed (in ``param`` or, Anthropic's shape
    having none, in the message)."""
    body = reply.json()
    error = body["error"]
    if case.field is None:
        return True
    if case.target.anthropic:
        return case.field in error["message"]
    return (error.get("param") or "").startswith(case.field) or case.field in error["message"]


async def test_hostile_bodies_never_get_a_5xx_or_a_logged_traceback_and_errors_name_the_field(tmp_path):
    (tmp_path / "prompts").mkdir()
    tracebacks = ErrorTracebacks()
    logging.getLogger().addHandler(tracebacks)
    try:
        async with gateway(CONFIG, base_dir=tmp_path) as app:
            for target in TARGETS:   # every body mutated is one the gateway serves
                for base in (target.base, target.rich or target.base):
                    served = await request(app, target.method, target.path, base,
                                           headers=ADMIN if target.admin else [])
                    assert served.status in (200, 201), (target.path, base, served.body[:300])

            async def send(case: Case) -> Reply:
                with trio.fail_after(10):
                    return await request(app, case.target.method, case.target.path, case.body,
                                         headers=ADMIN if case.target.admin else [])

            @settings(max_examples=800, deadline=None, derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
            @given(cases())
            def fuzz(case: Case) -> None:
                before = len(tracebacks.records)
                reply = trio.from_thread.run(send, case)
                assert reply.status < 500, (case, reply.status, reply.body[:300])
                assert len(tracebacks.records) == before, (case, tracebacks.records[-1].getMessage())
                if reply.status >= 400:
                    assert named(reply, case), (case, reply.body[:300])

            await trio.to_thread.run_sync(fuzz)
    finally:
        logging.getLogger().removeHandler(tracebacks)
