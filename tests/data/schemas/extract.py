"""Rebuild the JSON Schemas in this folder from the published specs (see README.md for the sources).

    python tests/data/schemas/extract.py OPENAI_OPENAPI_JSON OPENRESPONSES_OPENAPI_JSON

Each OpenAPI document's ``components.schemas`` is cut down to the objects the simulated backends
answer with (``ROOTS``) and everything they reference, with references rewritten to ``#/$defs/...``
and prose (descriptions, examples, vendor ``x-`` keys) left out. The Anthropic schema is built from
the ``anthropic`` SDK's response types (its pydantic models, generated from Anthropic's OpenAPI spec);
pydantic cannot tell a required nullable field from an optional one, so the required lists come from
the spec as the Go SDK records it (``api:"required"``), in ``ANTHROPIC_REQUIRED``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PROSE = {"description", "example", "examples", "title"}
MAPS = {"properties", "patternProperties", "$defs", "definitions"}   # their keys are names, not keywords

OPENAI_ROOTS = ["Response", "ResponseStreamEvent", "ResponseItemList", "CompactResource",
                "CreateChatCompletionResponse", "CreateChatCompletionStreamResponse", "CreateCompletionResponse",
                "CreateEmbeddingResponse", "ImagesResponse"]
OPENRESPONSES_ROOTS = ["ResponseResource", "CompactResource"]   # and every *StreamingEvent

# Anthropic's required fields (anthropic-sdk-go v1.60.0, message.go: the fields tagged api:"required").
ANTHROPIC_REQUIRED = {
    "Message": ["id", "container", "content", "model", "role", "stop_details", "stop_reason", "stop_sequence",
                "type", "usage"],
    "Usage": ["cache_creation", "cache_creation_input_tokens", "cache_read_input_tokens", "inference_geo",
              "input_tokens", "output_tokens", "output_tokens_details", "server_tool_use", "service_tier"],
    "MessageDeltaUsage": ["cache_creation_input_tokens", "cache_read_input_tokens", "input_tokens",
                          "output_tokens", "output_tokens_details", "server_tool_use"],
    "Delta": ["container", "stop_details", "stop_reason", "stop_sequence"],
    "TextBlock": ["citations", "text", "type"],
    "ToolUseBlock": ["id", "caller", "input", "name", "type"],
    "CacheCreation": ["ephemeral_1h_input_tokens", "ephemeral_5m_input_tokens"],
    "ServerToolUsage": ["web_fetch_requests", "web_search_requests"],
    "OutputTokensDetails": ["thinking_tokens"],
}


def _clean(node: Any, in_map: bool = False) -> Any:
    if isinstance(node, list):
        return [_clean(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if not in_map and (key in PROSE or key.startswith("x-")):
            continue
        if key == "$ref" and isinstance(value, str):
            value = "#/$defs/" + value.rsplit("/", 1)[1]
        out[key] = _clean(value, in_map=key in MAPS and not in_map)
    if not in_map and out.pop("nullable", False):   # OpenAPI 3.0's spelling, left in a few 3.1 schemas
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def _refs(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*map(_refs, node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"].rsplit("/", 1)[1]} if isinstance(node.get("$ref"), str) else set()
    return found.union(*(_refs(v) for k, v in node.items() if k != "$ref"))


def cut(document: dict[str, Any], roots: list[str], source: str) -> dict[str, Any]:
    schemas = document["components"]["schemas"]
    keep, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo.extend(_refs(schemas[name]))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$comment": source,
            "$defs": {name: _clean(schemas[name]) for name in sorted(keep)}}


def anthropic_schema() -> dict[str, Any]:
    import anthropic
    import pydantic
    from anthropic.types import Message, RawMessageStreamEvent

    defs: dict[str, Any] = {}
    for name, kind in (("Message", Message), ("MessageStreamEvent", RawMessageStreamEvent)):
        schema = pydantic.TypeAdapter(kind).json_schema(ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        defs[name] = schema
    for name, required in ANTHROPIC_REQUIRED.items():
        defs[name]["required"] = required
    # The SDK handles these two events itself, so its union leaves them out; Anthropic's streaming
    # documentation lists them: a keep-alive, and an error after the 200 (e.g. overloaded_error).
    defs["PingEvent"] = {"type": "object", "properties": {"type": {"const": "ping"}}, "required": ["type"]}
    defs["ErrorEvent"] = {"type": "object", "required": ["type", "error"], "properties": {
        "type": {"const": "error"}, "error": {"type": "object", "required": ["type", "message"], "properties": {
            "type": {"type": "string"}, "message": {"type": "string"}}}}}
    defs["MessageStreamEvent"]["anyOf"] += [{"$ref": "#/$defs/PingEvent"}, {"$ref": "#/$defs/ErrorEvent"}]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": f"anthropic (Python SDK) {anthropic.__version__} response types; required fields: "
                        "anthropic-sdk-go v1.60.0",
            "$defs": {name: _clean(defs[name]) for name in sorted(defs)}}


def _write(name: str, schema: dict[str, Any]) -> None:
    """One definition a line, so a new version of a spec diffs by the objects that changed."""
    defs = schema.pop("$defs")
    lines = [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(defs.items())]
    head = json.dumps(schema, sort_keys=True)[:-1]
    (HERE / name).write_text(head + ', "$defs": {\n' + ",\n".join(lines) + "\n}}\n")


def main(openai_path: str, openresponses_path: str) -> None:
    openai = json.loads(Path(openai_path).read_text())
    _write("openai.json", cut(openai, OPENAI_ROOTS, f"openai-openapi {openai['info']['version']}"))
    spec = json.loads(Path(openresponses_path).read_text())
    names = spec["components"]["schemas"]
    roots = OPENRESPONSES_ROOTS + sorted(n for n in names if n.endswith("StreamingEvent"))
    _write("openresponses.json", cut(spec, roots, f"Open Responses {spec['info']['version']}"))
    _write("anthropic.json", anthropic_schema())


if __name__ == "__main__":
    main(*sys.argv[1:3])
