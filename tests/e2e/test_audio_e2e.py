"""End-to-end: the audio API through hypercorn on 127.0.0.1, the official openai SDK as the client.

Transcriptions and translations (multipart uploads, every response_format,
streamed transcription events) and speech (the audio relayed as it arrives)
are routed like every call (failover before the first byte), priced in the
ledger per minute of audio, per character or per token, and refused clearly
on bad input. One gateway serves the module (``served``): each test has its
own models on it where its backends must behave in their own way.
"""

from __future__ import annotations

import functools
import io
import queue
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator

import attrs
import httpx
import openai
import pytest
import trio
import yaml
from hypercorn.trio import serve

from switchyard.config.load import load_file
from switchyard.protocol.serving import client_eof
from switchyard.protocol.serving.app import create_app
from switchyard.protocol.serving.workers import hypercorn_config
from switchyard.protocol.simulated.audio import CHUNK, SECONDS_PER_CHARACTER, tone, transcript, wav
from switchyard.protocol.simulated.openai import SimulatedTransport
from tests.conftest import SIMULATOR_HISTORY
from tests.e2e.support import Gateway, gateway_config, in_thread

# the SDK warns on a call whose deprecation only its typing knows; the API serves it
pytestmark = [pytest.mark.simulator_history, pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")]

WAV = wav(tone(1.5))   # 1.5 s exactly, by its header


def audio_backend(name: str, models: list[str], **simulation: Any) -> dict[str, Any]:
    sim: dict[str, Any] = {"latency": "5ms", "tokens_per_second": 0}
    sim.update(simulation)
    return {"name": name, "type": "simulated", "models": models, "simulation": sim}


PRICED = [{"id": "whisper-1", "metadata": {"pricing": {"per_audio_minute": 0.006}}},
          {"id": "tts-1", "metadata": {"pricing": {"input_characters": 15.0}}},
          {"id": "gpt-4o-transcribe", "metadata": {"pricing": {
              "input_tokens": 2.5, "audio_input_tokens": 6.0, "output_tokens": 10.0}}}]
SHARED = gateway_config(
    {**audio_backend("sim", ["whisper-1", "tts-1", "gpt-4o-transcribe"]), "model_configs": PRICED},
    audio_backend("down", ["whisper-fo"], failure={"status": 503}),   # fails over to "up"
    audio_backend("up", ["whisper-fo"]),
    audio_backend("broken", ["tts-broken"], failure={"reset_after_chunk": 2}),   # speech cut after 2 chunks
    usage={"ledger": "memory"})


@attrs.define
class Served:
    """The module's gateway, and its trio loop's token: its ledger is flushed in that loop."""

    gw: Gateway
    token: trio.lowlevel.TrioToken

    async def in_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await trio.to_thread.run_sync(functools.partial(trio.from_thread.run, fn, *args,
                                                               trio_token=self.token))

    def requests(self) -> int:
        """How many requests the simulated backends took so far."""
        return sum(len(self.gw.sim(name).requests) for name in ("sim", "down", "up", "broken"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One gateway for the module, in a trio loop of its own thread (pytest-trio's fixtures live for one
    test), built from its config file as ``start_gateway`` builds one; its simulators keep a history."""
    path: Path = tmp_path_factory.mktemp("audio") / "switchyard.yaml"
    path.write_text(yaml.safe_dump(SHARED, sort_keys=False), encoding="utf-8")
    started: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    async def hold() -> None:
        client_eof.install()
        app = create_app(str(path))
        hc = hypercorn_config(load_file(str(path)).snapshot.server, "127.0.0.1:0")
        hc.graceful_timeout = 1.0
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(functools.partial(serve, app, hc, shutdown_trigger=done.wait))
            started.put(Served(Gateway(url=binds[0], app=app, config_path=path), trio.lowlevel.current_trio_token()))
            await trio.to_thread.run_sync(stop.wait, abandon_on_cancel=True)
            done.set()
            nursery.cancel_scope.deadline = trio.current_time() + 5

    def run() -> None:
        try:
            trio.run(hold)
        except BaseException as exc:   # reported to the fixture's thread
            started.put(exc)

    kept, SimulatedTransport.history = SimulatedTransport.history, SIMULATOR_HISTORY
    thread = threading.Thread(target=run, name="audio-e2e-gateway", daemon=True)
    thread.start()
    try:
        got = started.get(timeout=30)
        if isinstance(got, BaseException):
            raise got
        yield got
    finally:
        SimulatedTransport.history = kept
        stop.set()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the module's gateway did not stop within 30 s"


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


def upload(data: bytes = WAV, name: str = "speech.wav") -> tuple[str, io.BytesIO, str]:
    return (name, io.BytesIO(data), "audio/wav")


async def record_of(served: Served, request_id: str) -> Any:
    ledger = served.gw.app.runtime.ledger
    with trio.fail_after(10):   # recorded once the answer went out
        while not ledger.store.for_request(request_id):
            await served.in_loop(ledger.flush)
            await trio.sleep(0.01)
    [record] = ledger.store.for_request(request_id)
    return record


async def test_transcriptions_relay_the_upload_and_answer_the_sdk(served):
    with sdk(served.gw) as client:
        result = await in_thread(client.audio.transcriptions.create, model="whisper-1", file=upload(),
                                 language="en", temperature=0.2)
    assert result.text == transcript(WAV)[0]
    sent = served.gw.sim("sim").requests[-1]
    assert sent.url.path == "/v1/audio/transcriptions"
    assert WAV in sent.content and b'name="language"\r\n\r\nen' in sent.content


async def test_every_text_format_and_word_timestamps_pass_through(served):
    with sdk(served.gw) as client:
        srt = await in_thread(client.audio.transcriptions.create, model="whisper-1", file=upload(),
                              response_format="srt")
        text = await in_thread(client.audio.transcriptions.create, model="whisper-1", file=upload(),
                               response_format="text")
        verbose = await in_thread(client.audio.transcriptions.create, model="whisper-1", file=upload(),
                                  response_format="verbose_json", timestamp_granularities=["word", "segment"])
    assert srt.startswith("1\n00:00:00,000 --> 00:00:01,500\n")
    assert text.strip() == transcript(WAV)[0]
    assert verbose.duration == 1.5 and verbose.words and verbose.words[0].word == "Simulated"
    # the array went to the backend as the SDK sent it: one part per value
    assert served.gw.sim("sim").requests[-1].content.count(b'name="timestamp_granularities[]"') == 2


async def test_translations_answer_the_sdk(served):
    with sdk(served.gw) as client:
        result = await in_thread(client.audio.translations.create, model="whisper-1", file=upload())
    assert result.text == transcript(WAV)[0]
    assert served.gw.sim("sim").requests[-1].url.path == "/v1/audio/translations"


async def test_a_streamed_transcription_relays_its_events_and_prices_its_tokens(served):
    with sdk(served.gw) as client:
        def collect() -> tuple[list[Any], str]:
            with client.audio.transcriptions.with_streaming_response.create(
                    model="gpt-4o-transcribe", file=upload(), stream=True) as raw:
                return list(raw.parse()), raw.headers["x-request-id"]
        events, request_id = await in_thread(collect)
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done" and set(kinds[:-1]) == {"transcript.text.delta"}
    assert "".join(e.delta for e in events[:-1]) == events[-1].text == transcript(WAV)[0]
    record = await record_of(served, request_id)
    # 15 audio tokens at $6/M (not the text rate), 7 output tokens at $10/M
    assert (record.endpoint, Decimal(str(record.cost)), record.estimated) == \
        ("audio_transcriptions", Decimal("0.00016"), False)


async def test_the_ledger_prices_a_wav_transcription_per_minute_from_its_header(served):
    with sdk(served.gw) as client:
        raw = await in_thread(client.audio.transcriptions.with_raw_response.create, model="whisper-1",
                              file=upload(), response_format="text")
    assert raw.headers["x-continuum-cost"] == "0.00015"   # 1.5 s of 60 at $0.006
    assert "x-continuum-cost-estimated" not in raw.headers
    record = await record_of(served, raw.headers["x-request-id"])
    assert (record.endpoint, Decimal(str(record.cost)), record.estimated) == \
        ("audio_transcriptions", Decimal("0.00015"), False)


async def test_a_file_that_is_no_wav_is_priced_on_the_backends_duration(served):
    mp3 = b"ID3" + b"\x01" * 47_997   # 3 s at the simulator's 16 kB a second; it says so in its usage
    with sdk(served.gw) as client:
        raw = await in_thread(client.audio.transcriptions.with_raw_response.create, model="whisper-1",
                              file=upload(mp3, "speech.mp3"))
    assert raw.headers["x-continuum-cost"] == "0.0003"
    assert "x-continuum-cost-estimated" not in raw.headers


async def test_speech_streams_audio_and_prices_its_characters(served):
    text = "Hello from the gateway."   # 23 characters
    with sdk(served.gw) as client:
        def collect() -> tuple[list[bytes], Any]:
            with client.audio.speech.with_streaming_response.create(
                    model="tts-1", voice="alloy", input=text, response_format="wav") as streamed:
                return list(streamed.iter_bytes(4800)), streamed.headers
        chunks, headers = await in_thread(collect)
    audio = b"".join(chunks)
    assert audio == wav(tone(len(text) * SECONDS_PER_CHARACTER))
    assert headers["content-type"] == "audio/wav" and "content-length" not in headers   # relayed, not held
    assert headers["x-continuum-cost"] == "0.000345"
    record = await record_of(served, headers["x-request-id"])
    assert (record.endpoint, record.model, Decimal(str(record.cost))) == ("audio_speech", "tts-1",
                                                                           Decimal("0.000345"))


async def test_speech_cut_after_its_first_chunks_aborts_the_body_without_text_in_it(served):
    text = "A sentence long enough for several chunks of audio."
    with sdk(served.gw) as client:
        def collect() -> tuple[bytes, BaseException | None]:
            got: list[bytes] = []
            try:
                with client.audio.speech.with_streaming_response.create(
                        model="tts-broken", voice="alloy", input=text, response_format="wav") as streamed:
                    assert streamed.status_code == 200
                    for chunk in streamed.iter_bytes():
                        got.append(chunk)
            except Exception as exc:   # the SDK's httpx raises its own RemoteProtocolError
                return b"".join(got), exc
            return b"".join(got), None
        audio, error = await in_thread(collect)
    # the client learns the body is incomplete; what it got is the backend's audio and nothing else
    assert type(error).__name__ == "RemoteProtocolError" and "incomplete" in str(error), repr(error)
    assert audio == wav(tone(len(text) * SECONDS_PER_CHARACTER))[:2 * CHUNK]
    assert served.gw.sim("broken").count("reset_after:2") >= 1


async def test_a_failed_backend_fails_over_before_the_first_byte(served):
    with sdk(served.gw) as client:
        result = await in_thread(client.audio.transcriptions.create, model="whisper-fo", file=upload(),
                                 extra_headers={"x-backend": "down"})
    assert result.text == transcript(WAV)[0]
    assert served.gw.sim("down").count("status:503") >= 1 and WAV in served.gw.sim("up").requests[-1].content


async def test_an_upload_over_max_upload_bytes_is_a_413_before_any_backend_hears_of_it(start_gateway):
    config = gateway_config(audio_backend("sim-a", ["whisper-1"]))
    config["server"]["max_upload_bytes"] = 2048
    gw = await start_gateway(config)
    with sdk(gw) as client, pytest.raises(openai.APIStatusError) as refused:
        await in_thread(client.audio.transcriptions.create, model="whisper-1", file=upload())
    assert refused.value.status_code == 413 and "server.max_upload_bytes" in refused.value.message
    assert gw.sim("sim-a").requests == []


@pytest.mark.parametrize(("create", "kwargs", "param"), [
    ("transcriptions", {"response_format": "mp3"}, "response_format"),
    ("translations", {"response_format": "diarized_json"}, "response_format"),
    ("transcriptions", {"timestamp_granularities": ["sentence"]}, "timestamp_granularities[0]"),
    ("transcriptions", {"temperature": 3}, "temperature"),
    ("speech", {"response_format": "ogg"}, "response_format"),
    ("speech", {"speed": 9}, "speed"),
    ("speech", {"input": ""}, "input"),
])
async def test_bad_fields_are_400s_naming_the_field(served, create, kwargs, param):
    before = served.requests()
    with sdk(served.gw) as client, pytest.raises(openai.BadRequestError) as refused:
        if create == "speech":
            await in_thread(client.audio.speech.create, **{"model": "tts-1", "voice": "alloy", "input": "hi",
                                                           **kwargs})
        else:
            await in_thread(getattr(client.audio, create).create, model="whisper-1", file=upload(), **kwargs)
    assert refused.value.body["param"] == param and refused.value.body["type"] == "invalid_request_error"
    assert served.requests() == before


async def test_a_malformed_form_is_a_400_naming_the_multipart_body(served):
    before = served.requests()
    cut = b'--xyz\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1'   # no closing boundary
    async with httpx.AsyncClient() as client:
        answer = await client.post(served.gw.v1 + "/audio/transcriptions", content=cut,
                                   headers={"content-type": "multipart/form-data; boundary=xyz"})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_multipart"
    assert served.requests() == before
