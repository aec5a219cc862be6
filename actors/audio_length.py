"""How many seconds of audio an upload holds, for pricing per minute: exact for WAV, else what the backend said
or a guess.

A WAV file's header says it exactly (the data chunk's size over the format's byte rate). Other containers
(mp3, m4a, ogg, flac, webm) would need a decoder; for them the backend's own figure is taken when its answer
carries one (``duration`` in ``verbose_json``, ``usage.seconds`` when ``usage.type`` is ``duration``), and
otherwise the seconds are estimated from the file's size at 128 kbit/s and the cost is marked estimated.
Pure: no I/O.
"""

from __future__ import annotations

import math
import struct
from typing import Any

GUESS_BYTES_PER_SECOND = 16_000   # 128 kbit/s: a common bitrate for compressed speech


def wav_seconds(data: bytes) -> float | None:
    """The duration a RIFF/WAVE file's header states, or None when ``data`` is no readable WAV."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    byte_rate: int | None = None
    at = 12
    while at + 8 <= len(data):
        kind, size = data[at:at + 4], struct.unpack("<I", data[at + 4:at + 8])[0]
        if kind == b"fmt " and size >= 16 and at + 24 <= len(data):
            byte_rate = struct.unpack("<I", data[at + 16:at + 20])[0]
        elif kind == b"data":
            if not byte_rate:
                return None
            # a streamed WAV writes 0 or 0xFFFFFFFF as its size: the bytes present then say it
            held = min(size, len(data) - at - 8) if size not in (0, 0xFFFFFFFF) else len(data) - at - 8
            return held / byte_rate
        at += 8 + size + (size & 1)
    return None


def reported_seconds(payload: Any) -> float | None:
    """The seconds a transcription answer says it heard: ``usage.seconds`` (``type: duration``) or a
    ``verbose_json`` answer's ``duration``."""
    if not isinstance(payload, dict):
        return None
    usage = payload.get("usage")
    for value in ((usage or {}).get("seconds") if isinstance(usage, dict) else None, payload.get("duration")):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
            return float(value)
    return None


def guessed_seconds(size: int) -> float:
    return size / GUESS_BYTES_PER_SECOND
