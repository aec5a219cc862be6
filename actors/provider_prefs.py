"""The client's ``provider`` object (``proxy.client_provider_preferences``), read by hand.

Validated field by field rather than by a schema, so every refusal names the
exact path in ``param`` (``provider.only[3]``, ``provider.max_price.cached``)
and the rule it broke. Unknown fields are refused, never ignored: a client
that misspells ``ignroe`` must not be routed as if it had excluded nothing.
The restrictive forms Switchyard cannot honour (``require_parameters: true``,
``data_collection: "deny"``) are refused by name with their own code, so a
client can tell "you sent nonsense" from "you asked for what this deployment
cannot promise".

Pure: the value it makes is ``actors/routing/provider_prefs.py``'s, and
what the router does with it lives in ``actors/routing/provider_rank.py``.
"""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Any

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.routing.provider_prefs import NO_PREFERENCES, MaxPrice, ProviderPrefs

MAX_OBJECT_BYTES = 16 * 1024          # the serialized object (compact JSON, UTF-8)
MAX_NAMES = 16                        # entries in each of order / only / ignore
MAX_NAME_BYTES = 128                  # UTF-8 bytes of one name
SORTS = ("price", "throughput", "latency")
PRICE_KEYS = ("prompt", "completion")
FIELDS = ("order", "only", "ignore", "sort", "max_price", "require_parameters", "data_collection")

INVALID_TYPE = "invalid_type"
INVALID_VALUE = "invalid_value"
UNSUPPORTED = "unsupported_provider_preference"     # well formed, but a promise Switchyard cannot keep
UNSATISFIABLE = "provider_preferences_unsatisfiable"  # the filters left no backend (raised by the caller)




def _type(value: Any) -> str:
    return {str: "string", bool: "boolean", int: "integer", float: "number", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def _bad_type(path: str, expected: str, value: Any) -> InvalidRequest:
    return InvalidRequest(f"'{path}' must be {expected}, got {_type(value)}", param=path, code=INVALID_TYPE)


def _bad_value(path: str, message: str, code: str = INVALID_VALUE) -> InvalidRequest:
    return InvalidRequest(f"'{path}' {message}", param=path, code=code)


def serialized_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON in UTF-8 (a lone surrogate counts as its 3 bytes)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))


def parse_provider(value: Any) -> ProviderPrefs:
    """The client's ``provider`` value as preferences, or the first InvalidRequest.

    None (absent or JSON null) means no preferences. Fields are checked in
    the object's own key order, so the first problem the client wrote is the
    one reported; null for a field is the same as leaving it out.
    """
    if value is None:
        return NO_PREFERENCES
    if not isinstance(value, dict):
        raise _bad_type("provider", "an object", value)
    size = serialized_size(value)
    if size > MAX_OBJECT_BYTES:
        raise _bad_value("provider", f"must be at most {MAX_OBJECT_BYTES} bytes as compact JSON, got {size}")
    out: dict[str, Any] = {}
    for field, raw in value.items():
        path = f"provider.{field}"
        if field not in FIELDS:
            raise _bad_value(path, f"is not a known field; known fields are {', '.join(FIELDS)}")
        if raw is None:
            continue
        if field in ("order", "only", "ignore"):
            out[field] = _names(raw, path)
        elif field == "sort":
            out[field] = _sort(raw, path)
        elif field == "max_price":
            out[field] = _max_price(raw, path)
        elif field == "require_parameters":
            _require_parameters(raw, path)
        else:
            _data_collection(raw, path)
    return ProviderPrefs(**out)


def _names(raw: Any, path: str) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise _bad_type(path, "an array of backend names", raw)
    if len(raw) > MAX_NAMES:
        raise _bad_value(path, f"must list at most {MAX_NAMES} names, got {len(raw)}")
    seen: dict[str, None] = {}
    for i, name in enumerate(raw):
        _check_name(name, f"{path}[{i}]")
        seen.setdefault(name, None)     # duplicates collapse; the first occurrence keeps its place
    return tuple(seen)


def _check_name(name: Any, path: str) -> None:
    if not isinstance(name, str):
        raise _bad_type(path, "a string", name)
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise _bad_value(path, "is not valid UTF-8 (a lone surrogate escape)") from None
    if not 1 <= size <= MAX_NAME_BYTES:
        raise _bad_value(path, f"must be 1 to {MAX_NAME_BYTES} bytes long, got {size}")
    if name != name.strip():
        raise _bad_value(path, f"must not start or end with whitespace, got {name!r}")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise _bad_value(path, f"must not contain control characters, got {name!r}")


def _sort(raw: Any, path: str) -> str:
    if not isinstance(raw, str):
        raise _bad_type(path, f"one of {', '.join(SORTS)}", raw)
    if raw not in SORTS:
        raise _bad_value(path, f"must be one of {', '.join(SORTS)}, got {raw!r}")
    return raw


def _max_price(raw: Any, path: str) -> MaxPrice:
    if not isinstance(raw, dict):
        raise _bad_type(path, "an object with 'prompt' and/or 'completion'", raw)
    prices: dict[str, float] = {}
    for key, price in raw.items():
        here = f"{path}.{key}"
        if key not in PRICE_KEYS:
            raise _bad_value(here, f"is not a known field; known fields are {', '.join(PRICE_KEYS)}")
        if price is None:
            continue
        if isinstance(price, bool) or not isinstance(price, (int, float)):
            raise _bad_type(here, "a number (USD per million tokens)", price)
        if not math.isfinite(price) or price < 0:
            raise _bad_value(here, f"must be a finite number of at least 0 (USD per million tokens), got {price}")
        prices[key] = float(price)
    return MaxPrice(**prices)


def _require_parameters(raw: Any, path: str) -> None:
    if not isinstance(raw, bool):
        raise _bad_type(path, "a boolean", raw)
    if raw:
        raise _bad_value(path, "true is not supported: Switchyard does not check which parameters a backend "
                               "honours; send false or leave it out", code=UNSUPPORTED)


def _data_collection(raw: Any, path: str) -> None:
    if not isinstance(raw, str):
        raise _bad_type(path, "\"allow\"", raw)
    if raw == "deny":
        raise _bad_value(path, "\"deny\" is not supported: Switchyard knows no backend's data policy; "
                               "send \"allow\" or leave it out", code=UNSUPPORTED)
    if raw != "allow":
        raise _bad_value(path, f"must be \"allow\", got {raw!r}")


def unsatisfiable(model: str, candidates: list[str], field: str | None = None) -> InvalidRequest:
    """The 400 for filters that left nothing of a non-empty candidate set.

    ``field`` (``only``, ``ignore`` or ``max_price``, see
    ``provider_rank.emptied_by``) sharpens ``param``; without it ``param``
    is ``provider``.
    """
    param = f"provider.{field}" if field else "provider"
    return InvalidRequest(f"The provider preferences exclude every backend that may serve the model "
                          f"'{model}' (candidates: {', '.join(candidates)})", param=param, code=UNSATISFIABLE)
