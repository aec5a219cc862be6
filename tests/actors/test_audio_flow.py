"""The audio API under MockClock: retries and fallback before the first byte, key allowlists and rate limits,
metrics by endpoint and a span per call, as for every other call."""

import pytest
import trio
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from switchyard.config.telemetry import OtlpExport
from switchyard.protocol.serving.otlp import SpanExport
from switchyard.protocol.simulated.audio import tone, transcript, wav
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

WAV = wav(tone(0.5))
BOUNDARY = "audio-test-boundary"
FORM = [(b"content-type", f"multipart/form-data; boundary={BOUNDARY}".encode())]
TEAM = [(b"authorization", b"Bearer sk-team-0123456789abcdef")]

CONFIG = """
health_checks: {interval: 1h}
timeouts:
  request:
    standard: {first_byte: 4s, total: 20s}
fallback:
  enabled: true
  fallback_policy: {preserve_parameters: false}
  fallback_chains: {big: [small]}
backends:
"""


def backend(name, models, sim=""):
    return f"  - {{name: {name}, type: simulated, models: [{models}], simulation: {{latency: 100ms{sim}}}}}\n"


def form(model, data=WAV, **fields):
    """A transcription form as the SDK writes it: text fields, then the file."""
    parts = [f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
             for name, value in {"model": model, **fields}.items()]
    parts.append(f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
                 f'Content-Type: audio/wav\r\n\r\n'.encode() + data + b"\r\n")
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


async def transcribe(app, model, headers=(), path="/v1/audio/transcriptions", **fields):
    return await request(app, "POST", path, form(model, **fields), FORM + list(headers))


async def speak(app, model, headers=(), text="Hello"):
    return await request(app, "POST", "/v1/audio/speech", {"model": model, "voice": "alloy", "input": text},
                         list(headers))


def sim(app, name):
    return app.runtime.upstream.simulated[f"{name}.simulated"]


def arrivals(app, name, t0):
    return [round(t - t0, 6) for t, kind in sim(app, name).events if kind == "request"]


# --- retries and fallback before the first byte -------------------------------------------------------------

async def test_a_transcription_falls_back_with_the_same_file_and_the_fallback_model(autojump_clock):
    config = CONFIG + backend("a", "big", ", failure: {status: 503}") + backend("b", "small")
    async with gateway(config) as app:
        reply = await transcribe(app, "big", language="en")
        assert reply.status == 200 and reply.json()["text"] == transcript(WAV)[0]
        assert reply.headers[b"x-fallback-used"] == b"true" and reply.headers[b"x-fallback-model"] == b"small"
        assert sim(app, "a").count("status:503") >= 1
        [sent] = sim(app, "b").requests
        assert sent.url.path == "/v1/audio/transcriptions"
        assert WAV in sent.content and b'name="model"\r\n\r\nsmall\r\n' in sent.content
        assert b'name="language"\r\n\r\nen\r\n' in sent.content


async def test_speech_that_stalls_before_its_first_byte_falls_back_at_the_first_byte_timeout(autojump_clock):
    config = CONFIG + backend("a", "big", ", failure: {stall_before_first_byte: true}") + backend("b", "small")
    async with gateway(config) as app:
        t0 = trio.current_time()
        reply = await speak(app, "big")
        assert reply.status == 200 and reply.headers[b"content-type"] == b"audio/wav"
        assert reply.body.startswith(b"RIFF")
        assert arrivals(app, "b", t0) == [4]   # standard first_byte: no byte from `a` within 4 s


async def test_speech_cut_after_its_first_chunk_is_not_retried_and_carries_no_error_text(autojump_clock):
    config = CONFIG + backend("a", "big", ", failure: {reset_after_chunk: 1}") + backend("b", "small")
    async with gateway(config) as app:
        reply = await speak(app, "big", text="A sentence long enough for several chunks.")
        assert reply.status == 200 and reply.body.startswith(b"RIFF") and b"error" not in reply.body
        assert reply.ended_at is None   # the body never ended: the server closes the connection
        assert sim(app, "b").requests == []


# --- keys: allowlists and rate limits ----------------------------------------------------------------------

KEYS = """
api_keys:
  - {id: team, key: sk-team-0123456789abcdef, allowed_models: [whisper-1], rate_limit: {requests_per_minute: 2}}
"""


async def test_a_keys_allowlist_and_rate_limit_apply_to_audio_calls(autojump_clock):
    async with gateway(KEYS + CONFIG + backend("a", "whisper-1, tts-1")) as app:
        assert (await transcribe(app, "whisper-1")).status == 401   # no key
        refused = await speak(app, "tts-1", TEAM)
        assert refused.status == 403 and refused.json()["error"]["code"] == "model_not_allowed"
        replies = [await transcribe(app, "whisper-1", TEAM, path=path)
                   for path in ("/v1/audio/transcriptions", "/v1/audio/translations", "/v1/audio/transcriptions")]
        assert [r.status for r in replies] == [200, 200, 429]
        assert replies[2].json()["error"]["code"] == "rate_limit_exceeded"
        assert len(sim(app, "a").requests) == 2


# --- metrics and spans ------------------------------------------------------------------------------------

async def test_audio_calls_are_counted_by_their_route(autojump_clock):
    async with gateway(CONFIG + backend("a", "whisper-1, tts-1")) as app:
        await transcribe(app, "whisper-1")
        await transcribe(app, "whisper-1", path="/v1/audio/translations")
        await speak(app, "tts-1")
        registry = app.runtime.metrics.registry
        for route, model in (("/v1/audio/transcriptions", "whisper-1"), ("/v1/audio/translations", "whisper-1"),
                             ("/v1/audio/speech", "tts-1")):
            assert registry.get_sample_value("switchyard_requests_total", {
                "route": route, "model": model, "backend": "a", "status": "200"}) == 1, route


@pytest.mark.parametrize(("path", "model", "operation"), [
    ("/v1/audio/transcriptions", "whisper-1", "transcription"),
    ("/v1/audio/translations", "whisper-1", "translation"),
    ("/v1/audio/speech", "tts-1", "speech"),
])
async def test_an_audio_call_is_a_root_span_and_an_attempt_span(autojump_clock, path, model, operation):
    async with gateway(CONFIG + backend("a", "whisper-1, tts-1")) as app:
        reply = await (speak(app, model) if path.endswith("speech") else transcribe(app, model, path=path))
        trace = app.runtime.traces.get(reply.headers[b"x-continuum-request-id"].decode())
        memory = InMemorySpanExporter()
        export = SpanExport(OtlpExport(endpoint="http://127.0.0.1:9/v1/traces"), lambda: app.runtime.snapshot,
                            exporter=memory)
        export.observe(trace)
        export.close()
    attempt, root = memory.get_finished_spans()
    assert attempt.parent.span_id == root.context.span_id
    assert attempt.name == f"{operation} {model}" and root.attributes["gen_ai.operation.name"] == operation
    assert root.attributes["http.route"] == path
