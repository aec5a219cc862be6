"""JSON from clients, parsed with a bounded depth; JSON to clients, always encodable.

Python's ``json`` recurses once per nesting level: a body nested about 1,000
deep raises ``RecursionError``, and one a little shallower still breaks
whatever walks it next (copies, re-serialization, translation). No API shape
we serve needs more than a few dozen levels, so a body nested deeper than
``MAX_DEPTH`` is refused with a 400 naming where it passed the limit. A body
with at most ``MAX_DEPTH`` opening brackets cannot be that deep, so the usual
body costs two byte counts; a larger one gets an iterative walk after the
parse (about a third of the parse's time).

JSON text may hold a lone surrogate (``"\\ud800"``) that UTF-8 cannot:
``utf8`` writes it back as its ``\\uXXXX`` escape, so echoing a client's
value in an answer or an error never fails.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # there at runtime; typeshed omits it
from typing import Any

from switchyard.actors import json_read
from switchyard.actors.errors import InvalidRequest

MAX_DEPTH = 128        # the body itself is level 1
_PATH_SHOWN = 512      # characters of the path an error quotes
_TOKEN = re.compile(r'["\[\]{},]')


def loads(raw: bytes | str) -> Any:
    """``json.loads(raw)`` (read by msgspec where it can: ``actors/json_read.py``); nesting deeper than
    ``MAX_DEPTH`` is an InvalidRequest (``json_too_deep``).

    Invalid JSON raises ``ValueError`` as ``json.loads`` does, for the caller to word."""
    if _openers(raw) <= MAX_DEPTH:
        return json_read.loads(raw)
    try:
        value = json.loads(raw)
    except RecursionError:
        raise too_deep(raw) from None
    if not _within(value, MAX_DEPTH):
        raise too_deep(raw)
    return value


def too_deep(raw: bytes | str) -> InvalidRequest:
    """The 400 for a body nested past ``MAX_DEPTH``, naming the path of the first value that does."""
    text = raw if isinstance(raw, str) else raw.decode(json.detect_encoding(raw), "surrogatepass")
    path = path_past(text, MAX_DEPTH)
    where = "" if path is None else f" at '{path}'"
    return InvalidRequest(f"Request body nests JSON deeper than {MAX_DEPTH} levels{where}; "
                          f"at most {MAX_DEPTH} are accepted", param=path or None, code="json_too_deep")


def path_past(text: str, limit: int) -> str | None:
    """The path (``metadata.a[0]``) of the first array or object of ``text`` nested deeper than
    ``limit``, or None when there is none (or the text stops being JSON before one)."""
    keys: list[str | int] = []   # per open container: the key or index being filled
    in_object: list[bool] = []
    expect_key = False
    pos = 0
    while (m := _TOKEN.search(text, pos)) is not None:
        ch, pos = m.group(), m.end()
        if ch == '"':
            try:
                value, pos = scanstring(text, pos)
            except ValueError:
                return None
            if expect_key:
                keys[-1], expect_key = value, False
        elif ch in "[{":
            if len(in_object) == limit:
                return _render(keys)
            in_object.append(ch == "{")
            keys.append("" if ch == "{" else 0)
            expect_key = ch == "{"
        elif ch in "]}":
            if not in_object:
                return None
            in_object.pop()
            keys.pop()
            expect_key = False
        elif in_object and in_object[-1]:
            expect_key = True
        elif in_object:
            keys[-1] = int(keys[-1]) + 1
    return None


def utf8(value: Any, **dumps: Any) -> bytes:
    """``json.dumps(value, ensure_ascii=False)`` as UTF-8; a lone surrogate is written as its escape."""
    return json.dumps(value, ensure_ascii=False, **dumps).encode("utf-8", "backslashreplace")


def _openers(raw: bytes | str) -> int:
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{")
    return raw.count(b"[") + raw.count(b"{")


def _within(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` arrays and objects deep (iteratively: no recursion)."""
    level, depth = ([value] if type(value) is dict or type(value) is list else []), 1
    while level:
        inner = [v for c in level for v in (c.values() if type(c) is dict else c)
                 if type(v) is dict or type(v) is list]
        if inner and depth >= limit:
            return False
        level, depth = inner, depth + 1
    return True


def _render(keys: list[str | int]) -> str:
    out = ""
    for key in keys:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out if len(out) <= _PATH_SHOWN else out[:_PATH_SHOWN] + "..."
