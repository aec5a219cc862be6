"""How long an upload is, for pricing per minute: a WAV header read exactly, the backend's figure, a guess."""

import struct

import pytest

from switchyard.actors.audio_length import guessed_seconds, reported_seconds, wav_seconds
from switchyard.protocol.simulated.audio import tone, wav


def riff(*chunks: bytes) -> bytes:
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def chunk(kind: bytes, data: bytes) -> bytes:
    return kind + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")


FMT = chunk(b"fmt ", struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16))   # 16 kB a second


def test_a_wav_lasts_its_data_over_its_byte_rate():
    assert wav_seconds(wav(tone(1.5))) == 1.5
    assert wav_seconds(riff(FMT, chunk(b"data", b"\0" * 8000))) == 0.5


def test_chunks_before_the_data_are_skipped_odd_sizes_padded():
    assert wav_seconds(riff(FMT, chunk(b"LIST", b"abc"), chunk(b"data", b"\0" * 4000))) == 0.25


def test_a_streamed_wav_without_a_size_counts_the_bytes_present():
    for size in (0, 0xFFFFFFFF):
        data = riff(FMT) + b"data" + struct.pack("<I", size) + b"\0" * 1600
        assert wav_seconds(data) == 0.1


def test_a_cut_file_counts_only_the_bytes_present():
    assert wav_seconds(riff(FMT, chunk(b"data", b"\0" * 16000))[:-8000]) == 0.5


@pytest.mark.parametrize("data", [
    b"", b"ID3\x04" + b"\0" * 100, b"RIFF\0\0\0\0AVI ", riff(chunk(b"data", b"\0" * 10)),   # data before fmt
    riff(chunk(b"fmt ", struct.pack("<HHIIHH", 1, 1, 8000, 0, 2, 16)), chunk(b"data", b"\0" * 10)),   # rate 0
    riff(FMT),   # no data chunk
])
def test_what_is_no_readable_wav_is_none(data):
    assert wav_seconds(data) is None


@pytest.mark.parametrize(("payload", "seconds"), [
    ({"text": "x", "usage": {"type": "duration", "seconds": 3}}, 3.0),
    ({"text": "x", "duration": 2.5}, 2.5),
    ({"text": "x", "usage": {"type": "tokens", "input_tokens": 5}}, None),
    ({"duration": -1}, None), ({"duration": True}, None), ({"duration": float("nan")}, None), ("text", None),
])
def test_the_backends_own_figure(payload, seconds):
    assert reported_seconds(payload) == seconds


def test_the_guess_is_128_kbit_a_second():
    assert guessed_seconds(48_000) == 3.0
