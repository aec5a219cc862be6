"""End-to-end: transcriptions relayed to a real HTTP upstream (``tests/audio_fake.py``, OpenAI's documented
answers) by ``openai``, ``vllm`` and ``azure`` backends: the path and the key each is sent, the streamed
events relayed as they come, the token usage priced."""

from __future__ import annotations

import io
import time
from decimal import Decimal
from typing import Any

import openai
import pytest
import trio

from switchyard.protocol.simulated.audio import tone, wav
from tests.audio_fake import TEXT, FakeAudio, running
from tests.e2e.support import Gateway, gateway_config, in_thread

WAV = wav(tone(0.5))
KEY = "upstream-key-0123456789"
PRICED = [{"id": "gpt-4o-transcribe", "metadata": {"pricing": {
    "input_tokens": 2.5, "audio_input_tokens": 6.0, "output_tokens": 10.0}}}]


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


def upload() -> tuple[str, io.BytesIO, str]:
    return ("speech.wav", io.BytesIO(WAV), "audio/wav")


async def test_a_streamed_transcription_from_an_openai_upstream_is_relayed_as_it_comes(start_gateway):
    async with running(FakeAudio(["gpt-4o-transcribe"], gap=0.2)) as fake:
        config = gateway_config({"name": "up", "type": "openai", "url": fake.url + "/v1", "api_key": KEY,
                                 "models": ["gpt-4o-transcribe"], "model_configs": PRICED},
                                usage={"ledger": "memory"})
        gw = await start_gateway(config)
        with sdk(gw) as client:
            def collect() -> tuple[list[tuple[float, Any]], str]:
                with client.audio.transcriptions.with_streaming_response.create(
                        model="gpt-4o-transcribe", file=upload(), stream=True) as raw:
                    return [(time.monotonic(), e) for e in raw.parse()], raw.headers["x-request-id"]
            events, request_id = await trio.to_thread.run_sync(collect)
        [sent] = fake.posts
    assert sent.path == "/v1/audio/transcriptions" and sent.headers["authorization"] == f"Bearer {KEY}"
    assert b'name="stream"\r\n\r\ntrue' in sent.body and WAV in sent.body
    kinds = [e.type for _, e in events]
    assert kinds == ["transcript.text.delta"] * 4 + ["transcript.text.done"]
    assert "".join(e.delta for _, e in events[:-1]) == events[-1][1].text == TEXT
    # relayed as they came (0.2 s apart upstream), not held to the end
    assert events[-1][0] - events[0][0] > 0.5
    ledger = gw.app.runtime.ledger
    with trio.fail_after(10):
        while not ledger.store.for_request(request_id):
            await ledger.flush()
            await trio.sleep(0.01)
    [record] = ledger.store.for_request(request_id)
    # 20 audio tokens at $6/M, 6 output tokens at $10/M
    assert (record.endpoint, Decimal(str(record.cost))) == ("audio_transcriptions", Decimal("0.00018"))


@pytest.mark.parametrize(("kind", "root", "path", "auth"), [
    ("vllm", "", "/v1/audio/transcriptions", ("authorization", f"Bearer {KEY}")),
    ("azure", "/openai/v1", "/openai/v1/audio/transcriptions", ("api-key", KEY)),
])
async def test_a_transcription_reaches_the_backends_path_with_its_key(start_gateway, kind, root, path, auth):
    async with running(FakeAudio(["whisper-deploy"])) as fake:
        config = gateway_config({"name": "up", "type": kind, "url": fake.url + root, "api_key": KEY,
                                 "models": ["whisper-deploy"]})
        config["health_checks"] = {"interval": "1h"}
        gw = await start_gateway(config)
        with sdk(gw) as client:
            result = await in_thread(client.audio.transcriptions.create, model="whisper-deploy", file=upload(),
                                     language="de")
        [sent] = fake.posts
    assert result.text == TEXT
    assert sent.path == path and sent.headers[auth[0]] == auth[1]
    assert "authorization" not in sent.headers if kind == "azure" else "api-key" not in sent.headers
    assert sent.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert WAV in sent.body and b'name="model"\r\n\r\nwhisper-deploy\r\n' in sent.body
    assert b'name="language"\r\n\r\nde\r\n' in sent.body
