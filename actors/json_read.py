"""JSON read by msgspec where it can: the client's request, a backend's answer and each of its stream events.

msgspec parses a chat chunk about four times faster than ``json``, and a
20-chunk stream parses 21 of them. The values and the errors stay ``json``'s:
what msgspec refuses (``NaN``, ``1e400``, lone surrogates, text that is not
UTF-8, nesting too deep) goes to ``json`` as before; msgspec accepts nothing
``json`` would refuse, and reads the rest to the same values (integers of
any size, floats correctly rounded, the last of repeated keys).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_decode = msgspec.json.Decoder().decode


def loads(data: bytes | str) -> Any:
    """``json.loads(data)``: bytes in the encoding ``json`` sniffs (a request or answer body)."""
    try:
        return _decode(data)
    except msgspec.DecodeError:   # ValidationError (1e400) is one too
        return json.loads(data)


def loads_utf8(data: bytes) -> Any:
    """``json.loads(data.decode())``: UTF-8 only, nothing sniffed (an SSE event's data)."""
    try:
        return _decode(data)
    except msgspec.DecodeError:
        return json.loads(data.decode())
