"""JSON Schemas as clients send them, for property tests of everything that reads a request by shape.

Tool parameters and structured-output formats are JSON Schemas, and what
clients put in them is wider than the shapes the gateway itself reads:
``"type"`` as a list (zod's ``.nullable()``, OpenAI strict mode's optional
fields: ``["string", "null"]``), a property named ``type`` (so an object's
``"type"`` key holds a schema, not a string), ``enum`` with mixed values,
``anyOf``/``oneOf``/``allOf``, ``$ref`` into ``$defs``, ``additionalProperties``
as a boolean or a schema, ``nullable``, ``default``/``examples`` holding any
JSON value. ``schemas()`` draws those, nested a few levels; ``client_schemas()``
mixes in the real clients' own tool schemas (``/work/shared/fixtures/clients``,
copied into ``tests/data/clients``), and ``chat_body``, ``responses_body`` and
``messages_body`` put them where each door takes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from hypothesis import strategies as st

FIXTURES = Path(__file__).parent / "data" / "clients"
TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
# Property names: the ones that collide with JSON Schema's and the gateway's own keys first.
NAMES = st.sampled_from(["type", "items", "properties", "enum", "format", "required", "anyOf", "role", "content",
                         "image_url", "image", "text", "name", "city", "$ref"]) | st.text(min_size=1, max_size=6)
SCALARS = st.none() | st.booleans() | st.integers(-2 ** 40, 2 ** 40) | \
    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6) | st.sampled_from(TYPES)
ANY_JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
                        max_leaves=6)
TYPE_VALUE = st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True)


def _optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


LEAF = st.builds(
    lambda base, extra: {**base, **extra},
    st.fixed_dictionaries({"type": TYPE_VALUE}) | st.just({}),
    _optional(description=st.text(max_size=8), enum=st.lists(SCALARS, max_size=4), format=st.sampled_from(
        ["date-time", "uri", "email", "uuid"]), nullable=st.booleans(), default=ANY_JSON, examples=st.lists(
        ANY_JSON, max_size=2), const=SCALARS, minimum=st.integers(-5, 5), maxLength=st.integers(0, 9),
        pattern=st.just("^[a-z]+$"), title=st.text(max_size=6)))


def _extend(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    obj = st.builds(
        lambda kind, props, typed, extra: {"type": kind, "properties": {**props, **typed},
                                           **({"required": sorted(props)[:2]} if props else {}), **extra},
        st.sampled_from(["object", ["object", "null"]]), st.dictionaries(NAMES, inner, max_size=3),
        _optional(type=inner),   # a property named "type": "properties" then maps "type" to a schema
        _optional(additionalProperties=st.booleans() | inner, description=st.text(max_size=8),
                  nullable=st.booleans()))
    array = st.builds(lambda kind, items: {"type": kind, "items": items},
                      st.sampled_from(["array", ["array", "null"]]), inner | st.lists(inner, max_size=2))
    combined = st.builds(lambda word, options: {word: options}, st.sampled_from(["anyOf", "oneOf", "allOf"]),
                         st.lists(inner, min_size=1, max_size=3))
    return obj | array | combined | st.just({"$ref": "#/$defs/node"})


SCHEMA_NODES = st.recursive(LEAF, _extend, max_leaves=8)


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A client's tool or output schema: an object at the top, as the APIs require, maybe with ``$defs``."""
    props = draw(st.dictionaries(NAMES, SCHEMA_NODES, max_size=3))
    if draw(st.booleans()):
        props["type"] = draw(SCHEMA_NODES)
    out: dict[str, Any] = {"type": "object", "properties": props}
    if props and draw(st.booleans()):
        out["required"] = sorted(props)
    if draw(st.booleans()):
        out["additionalProperties"] = draw(st.booleans() | SCHEMA_NODES)
    if draw(st.booleans()):
        out["$defs"] = {"node": draw(SCHEMA_NODES)}
    if draw(st.booleans()):
        out["$schema"] = "http://json-schema.org/draft-07/schema#"
    return out


def _fixture_schemas() -> Iterator[dict[str, Any]]:
    """Every tool parameter and output schema the recorded clients sent."""
    for path in sorted(FIXTURES.glob("*.json")):
        body = json.loads(path.read_text())["body"]
        tools = list(body.get("tools") or ())
        while tools:
            tool = tools.pop(0)
            tools.extend(tool.get("tools") or ())   # a namespace's members (Codex)
            for schema in (tool.get("parameters"), tool.get("input_schema"), (tool.get("function") or {}).get(
                    "parameters")):
                if isinstance(schema, dict):
                    yield schema
        fmt = (body.get("text") or {}).get("format") or {}
        if isinstance(fmt.get("schema"), dict):
            yield fmt["schema"]


FIXTURE_SCHEMAS = tuple(_fixture_schemas())


def client_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """A recorded client's schema or a generated one."""
    return st.sampled_from(FIXTURE_SCHEMAS) | schemas()


def fixture_body(name: str) -> dict[str, Any]:
    """The body a recorded client sent (``tests/data/clients/<name>.json``)."""
    return json.loads((FIXTURES / f"{name}.json").read_text())["body"]


USER = {"role": "user", "content": "hi"}


def chat_body(model: str, tool: dict[str, Any], output: dict[str, Any], stream: bool) -> dict[str, Any]:
    """A chat body with ``tool`` as a function's parameters and ``output`` as its response format's schema."""
    return {"model": model, "stream": stream, "messages": [USER],
            "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": tool}}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": output}}}


def responses_body(model: str, tool: dict[str, Any], output: dict[str, Any], stream: bool) -> dict[str, Any]:
    """A Responses body with ``tool`` as a function tool's parameters and ``output`` as ``text.format``'s schema."""
    return {"model": model, "stream": stream, "input": "hi",
            "tools": [{"type": "function", "name": "f", "description": "d", "parameters": tool}],
            "text": {"format": {"type": "json_schema", "name": "out", "schema": output}}}


def messages_body(model: str, tool: dict[str, Any], output: dict[str, Any], stream: bool) -> dict[str, Any]:
    """A Messages body with ``tool`` as a tool's ``input_schema`` and ``output`` as ``output_config.format``'s."""
    return {"model": model, "max_tokens": 100, "stream": stream, "messages": [USER],
            "tools": [{"name": "f", "description": "d", "input_schema": tool}],
            "output_config": {"format": {"type": "json_schema", "schema": output}}}
