"""Validation of ``backends[].request_extensions``.

Only ``body`` exists: ``defaults`` and ``overrides``, two optional mappings
of JSON values merged into every body sent to the backend
(``actors/routing/body_merge.py``). Everything is refused with its path
rather than dropped or coerced:

- unknown keys (``backends[0].request_extensions.headers``);
- ``model``, ``messages`` and ``stream`` at the top of either mapping: the
  router owns those (it writes the wire model id, may trim messages for a
  fallback hop, and relays the stream it asked for);
- values JSON has no form for (a YAML date, a set, binary, a non-finite
  number) and mapping keys that are not strings (YAML reads ``on:`` as
  true and ``1:`` as an integer), at the exact nested path.

The mappings are stored as plain dicts and lists of JSON values.
"""

from __future__ import annotations

import math
from typing import Any

from switchyard.config.rules import Problems, Reader, child, type_name
from switchyard.config.schema import BodyExtensions

ROUTER_OWNED = ("model", "messages", "stream")

_FAILED = object()


def request_extensions(r: Reader) -> BodyExtensions:
    body = r.section("body")
    defaults = _json_object(body, "defaults")
    overrides = _json_object(body, "overrides")
    body.finish()
    r.finish()
    return BodyExtensions(defaults=defaults, overrides=overrides)


def _json_object(r: Reader, key: str) -> dict[str, Any]:
    raw = r.get(key, lambda value: value, None)
    if raw is None:
        return {}
    path = child(r.path, key)
    if not isinstance(raw, dict):
        r.problems.error(path, f"must be a mapping of body fields, got {type_name(raw)}")
        return {}
    for owned in ROUTER_OWNED:
        if owned in raw:
            r.problems.error(child(path, owned), f"cannot be set here: the router owns '{owned}' "
                                                 f"(allowed: any body field except {', '.join(ROUTER_OWNED)})")
    value = _json_value(raw, path, r.problems)
    if value is _FAILED:
        return {}
    return {k: v for k, v in value.items() if k not in ROUTER_OWNED}


def _json_value(value: Any, path: str, problems: Problems) -> Any:
    """``value`` as plain JSON data, or _FAILED after reporting every offending path."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            problems.error(path, f"must be a finite number (JSON has no {value}), got {value}")
            return _FAILED
        return value
    if isinstance(value, list):
        items = [_json_value(v, child(path, i), problems) for i, v in enumerate(value)]
        return _FAILED if any(v is _FAILED for v in items) else items
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        failed = False
        for k, v in value.items():
            if not isinstance(k, str):
                problems.error(child(path, str(k)), f"key must be a string, got {type_name(k)} {k!r}; "
                                                   "quote it in the YAML")
                failed = True
                continue
            converted = _json_value(v, child(path, k), problems)
            failed = failed or converted is _FAILED
            out[k] = converted
        return _FAILED if failed else out
    problems.error(path, f"must be a JSON value (string, number, boolean, null, list or mapping), "
                         f"got {type_name(value)}; quote it in the YAML to send a string")
    return _FAILED
