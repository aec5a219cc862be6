"""What an audio request may ask, checked at the door: each mistake a 400 naming its field."""

import pytest

from switchyard.actors.errors import InvalidRequest
from switchyard.protocol.doors.audio_rules import check_speech, check_transcription, form_stream


def refused(check, *args):
    with pytest.raises(InvalidRequest) as caught:
        check(*args)
    return caught.value.param, caught.value.code


def test_a_transcription_form_of_every_known_field_passes():
    check_transcription({"model": "m", "language": "en", "prompt": "p", "response_format": "diarized_json",
                         "temperature": "0.5", "timestamp_granularities[]": ["word", "segment"],
                         "chunking_strategy": "auto"}, False)


@pytest.mark.parametrize(("payload", "translation", "expected"), [
    ({"response_format": "mp3"}, False, ("response_format", "invalid_value")),
    ({"response_format": "diarized_json"}, True, ("response_format", "invalid_value")),
    ({"temperature": "hot"}, False, ("temperature", "invalid_type")),
    ({"temperature": "nan"}, False, ("temperature", "invalid_type")),
    ({"temperature": "1.5"}, False, ("temperature", "invalid_value")),
    ({"timestamp_granularities[]": ["word", "line"]}, False, ("timestamp_granularities[1]", "invalid_value")),
    ({"timestamp_granularities": "word"}, False, ("timestamp_granularities", "invalid_value")),
    ({"language": ["en"]}, False, ("language", "invalid_type")),
])
def test_a_transcription_mistake_names_its_field(payload, translation, expected):
    assert refused(check_transcription, payload, translation) == expected


def test_stream_is_form_text_and_served_for_transcriptions_only():
    assert (form_stream({}, True), form_stream({"stream": "false"}, True), form_stream({"stream": "true"}, True)) \
        == (False, False, True)
    assert refused(form_stream, {"stream": "yes"}, True) == ("stream", "invalid_value")
    assert refused(form_stream, {"stream": "true"}, False) == ("stream", "invalid_value")


def test_speech_of_every_known_field_passes():
    check_speech({"input": "hi", "voice": {"id": "voice_123"}, "response_format": "pcm", "speed": 0.25,
                  "instructions": "calm", "stream_format": "sse"})


@pytest.mark.parametrize(("payload", "expected"), [
    ({"voice": "alloy"}, ("input", "missing_required_parameter")),
    ({"input": "", "voice": "alloy"}, ("input", "invalid_value")),
    ({"input": "x" * 4097, "voice": "alloy"}, ("input", "invalid_value")),
    ({"input": 5, "voice": "alloy"}, ("input", "invalid_type")),
    ({"input": "hi"}, ("voice", "missing_required_parameter")),
    ({"input": "hi", "voice": {"name": "x"}}, ("voice", "invalid_type")),
    ({"input": "hi", "voice": "alloy", "response_format": "ogg"}, ("response_format", "invalid_value")),
    ({"input": "hi", "voice": "alloy", "stream_format": "chunks"}, ("stream_format", "invalid_value")),
    ({"input": "hi", "voice": "alloy", "speed": 4.5}, ("speed", "invalid_value")),
    ({"input": "hi", "voice": "alloy", "speed": "1"}, ("speed", "invalid_type")),
    ({"input": "hi", "voice": "alloy", "speed": True}, ("speed", "invalid_type")),
    ({"input": "hi", "voice": "alloy", "stream": True}, ("stream", "invalid_value")),
])
def test_a_speech_mistake_names_its_field(payload, expected):
    assert refused(check_speech, payload) == expected
