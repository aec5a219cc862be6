"""Text from outside (a client's JSON, a backend's answer) made safe for what must encode it.

JSON can carry what UTF-8 cannot: a lone surrogate (``"\\ud800"``) is valid
JSON and a valid Python ``str``, and every encoder that writes UTF-8 refuses
it (sqlite3, psycopg, prometheus-client's exposition). PostgreSQL's ``text``
also refuses NUL. One such value in a ledger record or a metric label once
stalled the ledger behind it and made ``/metrics`` answer 500 until a
restart; the doors now refuse it in the fields the gateway names things by
(``problem``), and whatever still reaches a store or a label goes through
``clean``.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"   # what a lone surrogate or a NUL becomes
CUT = "\u2026"           # ends a value cut to its limit
_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def problem(text: str) -> str | None:
    """Why ``text`` is not valid text for a name (a lone surrogate, a NUL), or None when it is."""
    if text.isascii() and "\x00" not in text:
        return None   # every door asks it of every model name: the usual one costs two C calls
    found = _UNSAFE.search(text)
    if found is None:
        return None
    char = found.group()
    what = "a NUL character" if char == "\x00" else f"a lone surrogate (\\u{ord(char):04x})"
    return f"holds {what} at character {found.start()}"


def clean(text: str, limit: int | None = None) -> str:
    """``text`` with each lone surrogate and NUL replaced by U+FFFD, and cut to ``limit`` characters (the
    last one then ``CUT``). ASCII text within the limit and without NUL comes back as it is."""
    if (text.isascii() and "\x00" not in text) or _UNSAFE.search(text) is None:
        clean = text
    else:
        clean = _UNSAFE.sub(REPLACEMENT, text)
    if limit is not None and len(clean) > limit:
        clean = clean[:limit - 1] + CUT
    return clean


def is_clean(text: str) -> bool:
    """Whether ``clean(text)`` is ``text`` itself (no limit)."""
    return (text.isascii() and "\x00" not in text) or _UNSAFE.search(text) is None
