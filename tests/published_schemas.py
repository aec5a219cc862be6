"""Validation against the published schemas vendored in ``tests/data/schemas`` (sources in its README).

``problems(spec, name, value)`` lists what ``value`` breaks in the definition ``name`` of ``spec``
(``openai``, ``openresponses`` or ``anthropic``), each as ``path: message``; an empty list is a pass.
``event_problems`` checks one streamed event against the union a spec gives its events.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

SCHEMAS = Path(__file__).parent / "data" / "schemas"
# The union of streamed events, per spec (Open Responses lists its events one by one: the union is theirs).
EVENTS = {"openai": "ResponseStreamEvent", "anthropic": "MessageStreamEvent"}


@functools.cache
def _document(spec: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{spec}.json").read_text())


@functools.cache
def _validator(spec: str, name: str) -> Draft202012Validator:
    document = _document(spec)
    if name not in document["$defs"]:
        raise KeyError(f"{spec}.json has no definition {name!r}")
    return Draft202012Validator({**document, "$ref": f"#/$defs/{name}"})


def problems(spec: str, name: str, value: Any) -> list[str]:
    errors = list(_validator(spec, name).iter_errors(value))
    if not errors:
        return []
    best = best_match(errors)   # a union's failure: the branch that came closest
    nested = list(best.context or ())
    shown = [best] + ([min(nested, key=lambda e: len(e.absolute_path) * -1)] if nested else [])
    return [f"{name}.{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}" for e in shown]


def event_problems(spec: str, event: dict[str, Any]) -> list[str]:
    """What ``event`` (one streamed event, its ``type`` naming it) breaks in ``spec``'s events."""
    if spec != "openresponses":
        return problems(spec, EVENTS[spec], event)
    names = [n for n, d in _document(spec)["$defs"].items() if n.endswith("StreamingEvent")
             and event.get("type") in d.get("properties", {}).get("type", {}).get("enum", ())]
    if not names:
        return [f"{event.get('type')!r}: not an event type of Open Responses"]
    found = [problems(spec, n, event) for n in names]
    return [] if any(not f for f in found) else found[0]
