"""How big a request is, in tokens, without a tokenizer.

One estimator serves both fallback's context-window check
(``capabilities.needs_of``) and smart routing's ``when.input_tokens``, so a
request routed to a long-context tier by size is also the one fallback
judges too big for a small window.

It is deliberately rough and errs towards "bigger": ASCII text about three
characters a token (rounded up per string), every other character a token
of its own (CJK, emoji), every JSON number or boolean five tokens (a client
can inflate the figure this way; route on it, never grant on it), ``null``
nothing. Mapping keys count as text. The whole request counts: every
message (not only the last turn) and every message field except ``role``,
plus ``tools``, ``functions`` and ``response_format``; base64 ``data:``
URLs are strings like any other. A fixed framing allowance is added per
message and per request.

Fallback's check passes ``image_tokens``: there an image part counts as that
many tokens, not as the characters of its base64 URL, which would put a short
question with one photo past every context window and refuse all vision
fallback. ``when.input_tokens`` counts the URL, as the spec says. Only a
string ``type`` marks an image part: a JSON Schema in ``tools`` or
``response_format`` has objects whose ``type`` is a list of types
(``["string", "null"]``) or a property's schema (a property named ``type``),
and those are counted like any other value. The walk takes any JSON value
and never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ASCII_CHARS_PER_TOKEN = 3
SCALAR_TOKENS = 5          # a JSON number or boolean
MESSAGE_FRAMING = 4
REQUEST_FRAMING = 3
REQUEST_FIELDS = ("tools", "functions", "response_format")
IMAGE_PARTS = frozenset({"image_url", "input_image", "image"})


def text_tokens(text: str) -> int:
    if text.isascii():
        return -(-len(text) // ASCII_CHARS_PER_TOKEN)
    ascii_chars = len(text.encode("ascii", "ignore"))
    return -(-ascii_chars // ASCII_CHARS_PER_TOKEN) + (len(text) - ascii_chars)


def estimate_tokens(payload: Mapping[str, Any], image_tokens: int | None = None) -> int:
    """The request's estimated prompt size (see the module docstring for the rules)."""
    total = REQUEST_FRAMING
    pending: list[Any] = []
    messages = payload.get("messages")
    if isinstance(messages, (list, tuple)):
        for message in messages:
            total += MESSAGE_FRAMING
            if isinstance(message, Mapping):
                for name, value in message.items():
                    if name != "role":
                        total += text_tokens(str(name))
                        pending.append(value)
            else:
                pending.append(message)
    for name in REQUEST_FIELDS:
        if payload.get(name) is not None:
            pending.append(payload[name])
    # An explicit stack, not recursion: a deeply nested body must not hit the recursion limit.
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            total += text_tokens(value)
        elif isinstance(value, Mapping):
            kind = value.get("type")
            if image_tokens is not None and isinstance(kind, str) and kind in IMAGE_PARTS:
                total += image_tokens
                continue
            for name, inner in value.items():
                total += text_tokens(name if isinstance(name, str) else str(name))
                pending.append(inner)
        elif isinstance(value, (list, tuple)):
            pending.extend(value)
        elif isinstance(value, (bool, int, float)):
            total += SCALAR_TOKENS
    return total

