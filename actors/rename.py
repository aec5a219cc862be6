"""A backend's answer named the model by its upstream id (or a variant's base name): the client gets
the name it asked for. Used by the relay on every answer of an attempt that needs it."""

from __future__ import annotations

import json
from typing import Any, TypeGuard


class Rename:
    """Restores the public model id where a backend answered with its upstream id.

    Set per attempt, and only for an attempt that sent an upstream id, so
    every other answer pays nothing.

    Buffered: the relay parses the body anyway; only a top-level ``model``
    equal to the upstream id is replaced, and the body is re-serialized only
    then.

    Streams: the event is parsed anyway (to judge it), so the top-level
    ``model`` is compared on the parsed object; only when it is the upstream
    id do the bytes change, by replacing the first ``"model":"<upstream>"``
    (or ``"model": "<upstream>"``) in the event's raw bytes. That keeps the
    backend's framing and field order, costs one ``bytes.replace`` per
    chunk, and no ``json.dumps`` on the hot path. OpenAI-shaped chunks put
    ``model`` before ``choices``, so the first occurrence is the top-level
    one; a nested value cannot come first unless a backend orders its keys
    oddly, and an escaped quote inside a string never matches the needle.
    When neither form is in the bytes (escaped characters, other spacing),
    the event is re-encoded from the parsed object as a single ``data:`` line.
    """

    __slots__ = ("_needles", "_replacements", "public", "upstream")

    def __init__(self, upstream: str | None, public: str) -> None:
        self.upstream = upstream   # None: whatever string the backend put there (a variant's requested name)
        self.public = public
        pub = json.dumps(public, ensure_ascii=False).encode()
        self._replacements = (b'"model":' + pub, b'"model": ' + pub)
        self._needles = self._needles_for(upstream) if upstream is not None else ()

    @staticmethod
    def _needles_for(value: str) -> tuple[bytes, bytes]:
        up = json.dumps(value, ensure_ascii=False).encode()
        return (b'"model":' + up, b'"model": ' + up)

    def _matches(self, value: Any) -> TypeGuard[str]:
        if self.upstream is None:
            return isinstance(value, str) and value != self.public
        return isinstance(value, str) and value == self.upstream

    def payload(self, payload: Any, body: bytes) -> bytes:
        """The buffered body with the public id restored (the same bytes if nothing changed)."""
        if isinstance(payload, dict) and self._matches(payload.get("model")):
            payload["model"] = self.public
            return json.dumps(payload).encode()
        return body

    def event(self, obj: Any, raw: bytes) -> bytes:
        """One stream event with the public id restored; ``obj`` is updated in place."""
        if not isinstance(obj, dict):
            return raw
        value = obj.get("model")
        if not self._matches(value):
            return raw
        needles = self._needles if self.upstream is not None else self._needles_for(value)
        obj["model"] = self.public
        for needle, replacement in zip(needles, self._replacements, strict=False):
            if needle in raw:
                return raw.replace(needle, replacement, 1)
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
