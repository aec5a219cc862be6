"""``backends[].request_extensions.body``: the operator's fields merged leaf by leaf into a body.

``defaults`` fill what the body leaves unset and never replace what it has;
``overrides`` replace what it has, so static configuration has the last
word. Both recurse into objects present on both sides, so an operator can
set ``provider.sort`` without dropping the rest of a ``provider`` object.

A key counts as set when it is present, even with ``null``: the client's
explicit null reaches the backend as sent. Arrays are leaves (never merged
item by item). An override of ``null`` writes ``null``; it does not delete.

Pure: the input is never mutated. The result is a new dict; objects on a
merged path are copied, values taken from the configuration are deep
copies (so nothing downstream can edit the Snapshot), and untouched
subtrees of the client's body are shared with the input.
"""

from __future__ import annotations

from typing import Any, Mapping

from switchyard.config.schema import BodyExtensions


def merge_body(payload: dict[str, Any], ext: BodyExtensions) -> dict[str, Any]:
    """``payload`` with ``ext.defaults`` filled in, then ``ext.overrides`` applied.

    Empty extensions return ``payload`` itself, so the caller can keep the
    client's bytes when nothing changed (``merged is payload``).
    """
    if ext.empty:
        return payload
    out = _fill(payload, ext.defaults) if ext.defaults else dict(payload)
    return _override(out, ext.overrides) if ext.overrides else out


def _fill(body: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(body)
    for key, value in defaults.items():
        if key not in out:
            out[key] = _plain(value)
        elif isinstance(out[key], dict) and isinstance(value, Mapping):
            out[key] = _fill(out[key], value)
        # else: the body's own value stays, object or not
    return out


def _override(body: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(body)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _override(out[key], value)
        else:
            out[key] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """A deep copy of a configured JSON value as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
