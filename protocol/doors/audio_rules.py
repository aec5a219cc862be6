"""What an audio request may ask, checked at the door: each field's type and the values OpenAI's API takes.

Transcriptions and translations come as multipart forms, so their numbers and
booleans are form text (``temperature=0.2``, ``stream=true``); speech is JSON.
The first mistake is a 400 naming the field; fields not named here pass to the
backend as they came (a newer API's, a server's own).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from switchyard.actors.errors import InvalidRequest
from switchyard.protocol.doors.image_rules import string_field

TRANSCRIPTION_FORMATS = ("json", "text", "srt", "verbose_json", "vtt", "diarized_json")
TRANSLATION_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
GRANULARITIES = ("word", "segment")
SPEECH_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
STREAM_FORMATS = ("sse", "audio")
MAX_SPEECH_INPUT = 4096    # characters (OpenAI's limit)
SPEED = (0.25, 4.0)


def _one_of(value: str | None, field: str, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise InvalidRequest(f"'{field}' must be one of {', '.join(allowed)}, got {value!r}", param=field,
                             code="invalid_value")


def _number(payload: Mapping[str, Any], field: str, low: float, high: float, form: bool) -> None:
    value = payload.get(field)
    if value is None:
        return
    number: float | None = None
    if form and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    if number is None or not math.isfinite(number):
        raise InvalidRequest(f"'{field}' must be a number, got {value!r}", param=field, code="invalid_type")
    if not low <= number <= high:
        raise InvalidRequest(f"'{field}' must be between {low:g} and {high:g}, got {value!r}", param=field,
                             code="invalid_value")


def form_stream(payload: Mapping[str, Any], streams: bool) -> bool:
    """A form's ``stream`` (``true``/``false``); a stream asked where none is served is a 400."""
    value = payload.get("stream")
    if value is None or value == "false":
        return False
    if value != "true":
        raise InvalidRequest(f"'stream' must be true or false, got {value!r}", param="stream", code="invalid_value")
    if not streams:
        raise InvalidRequest("'stream' is not served for translations: the answer comes whole", param="stream",
                             code="invalid_value")
    return True


def check_transcription(payload: Mapping[str, Any], translation: bool) -> None:
    string_field(payload, "language")
    string_field(payload, "prompt")
    _one_of(string_field(payload, "response_format"), "response_format",
            TRANSLATION_FORMATS if translation else TRANSCRIPTION_FORMATS)
    _number(payload, "temperature", 0.0, 1.0, form=True)
    granularities = payload.get("timestamp_granularities[]")
    for i, value in enumerate(granularities if isinstance(granularities, list) else ()):
        if value not in GRANULARITIES:
            raise InvalidRequest(f"'timestamp_granularities[{i}]' must be one of {', '.join(GRANULARITIES)}, "
                                 f"got {value!r}", param=f"timestamp_granularities[{i}]", code="invalid_value")
    if "timestamp_granularities" in payload:
        raise InvalidRequest("'timestamp_granularities' is sent as 'timestamp_granularities[]', one part per "
                             "value", param="timestamp_granularities", code="invalid_value")


def check_speech(payload: Mapping[str, Any]) -> None:
    text = string_field(payload, "input")
    if text is None:
        raise InvalidRequest("Missing required parameter: 'input'", param="input", code="missing_required_parameter")
    if not text:
        raise InvalidRequest("'input' must not be empty", param="input", code="invalid_value")
    if len(text) > MAX_SPEECH_INPUT:
        raise InvalidRequest(f"'input' is {len(text)} characters; speech takes at most {MAX_SPEECH_INPUT}",
                             param="input", code="invalid_value")
    voice = payload.get("voice")
    if voice is None:
        raise InvalidRequest("Missing required parameter: 'voice'", param="voice", code="missing_required_parameter")
    if not (isinstance(voice, str) and voice) and not (isinstance(voice, dict) and isinstance(voice.get("id"), str)):
        raise InvalidRequest("'voice' must be a voice's name or an object with its 'id'", param="voice",
                             code="invalid_type")
    _one_of(string_field(payload, "response_format"), "response_format", SPEECH_FORMATS)
    _one_of(string_field(payload, "stream_format"), "stream_format", STREAM_FORMATS)
    string_field(payload, "instructions")
    _number(payload, "speed", *SPEED, form=False)
    if payload.get("stream") not in (None, False):
        raise InvalidRequest("'stream' is not a parameter of speech: its audio is always relayed as it comes "
                             "('stream_format' picks sse or raw audio)", param="stream", code="invalid_value")
