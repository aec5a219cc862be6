"""End-to-end: a bedrock backend (a fake Bedrock runtime on a real socket that verifies every SigV4
signature, ``tests/bedrock_fake.py``) behind a real Switchyard, through every door with the official
SDKs. One test per rule."""

from __future__ import annotations

import base64
import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import anthropic
import httpx
import openai
import pytest

from switchyard.protocol.wires import bedrock as bedrock_wire
from tests.aws_credentials_fake import FakeCredentialEndpoints
from tests.aws_credentials_fake import running as running_endpoints
from tests.bedrock_fake import ACCESS_KEY, API_KEY, REGION, SECRET_KEY, FakeBedrock, Reply, running
from tests.e2e.support import Gateway, backend, gateway_config, in_thread

WIRE_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"
MODEL = "haiku"
PROMPT = [{"role": "user", "content": "hi"}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def bedrock(fake: FakeBedrock, name: str = "br", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "bedrock", "url": fake.url, "region": REGION, "models": [MODEL],
            "model_configs": [{"id": MODEL, "upstream_id": WIRE_ID}], **extra}


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    """The environment's credentials, and nothing else of the machine's AWS setup."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bedrock_wire.PROVIDERS.clear()
    yield
    bedrock_wire.PROVIDERS.clear()


@pytest.fixture
async def fake() -> AsyncIterator[FakeBedrock]:
    async with running(FakeBedrock()) as server:
        yield server


@asynccontextmanager
async def clients(gw: Gateway) -> AsyncIterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10) as client:
        yield client


def config(*backends: dict[str, Any], **top: Any) -> dict[str, Any]:
    cfg = gateway_config(*backends, **top)
    cfg["server"]["max_body_bytes"] = 65536
    cfg.setdefault("retry", {"max_attempts": 1})
    return cfg


def text_of(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


async def test_a_chat_call_is_a_signed_converse_call_answered_as_a_chat_completion(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    async with clients(gw) as client:
        reply = await in_thread(client.chat.completions.create, model=MODEL, max_tokens=50, temperature=0.2,
                                top_p=0.9, stop=["END"],
                                messages=[{"role": "system", "content": "Be brief."}, *PROMPT,
                                          {"role": "assistant", "content": "Hello."},
                                          {"role": "user", "content": "Again"}])
    assert reply.choices[0].message.content == "Hello from bedrock."
    assert reply.choices[0].finish_reason == "stop" and reply.model == MODEL
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (9, 5, 14)
    seen = fake.last
    assert seen.signed and seen.raw_path == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    assert seen.body == {"messages": [{"role": "user", "content": [{"text": "hi"}]},
                                      {"role": "assistant", "content": [{"text": "Hello."}]},
                                      {"role": "user", "content": [{"text": "Again"}]}],
                         "system": [{"text": "Be brief."}],
                         "inferenceConfig": {"maxTokens": 50, "temperature": 0.2, "topP": 0.9,
                                             "stopSequences": ["END"]}}


async def test_a_streamed_call_is_converse_stream_decoded_from_the_binary_event_stream(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    fake.script.append(Reply(content=[{"text": "one two three"}]))
    async with clients(gw) as client:
        chunks = await in_thread(lambda: list(client.chat.completions.create(
            model=MODEL, messages=PROMPT, stream=True, stream_options={"include_usage": True})))
    assert text_of(chunks) == "one two three"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 14
    assert fake.last.signed and fake.last.path.endswith("/converse-stream")


async def test_a_stream_shows_no_usage_chunk_unless_asked(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True})
    events = [e for e in reply.text.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and not any('"usage"' in e for e in events)


async def test_tools_round_trip_as_tool_use_and_tool_result(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    fake.script.append(Reply(content=[{"text": "Let me check."}, {"toolUse": {
        "toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}}], stop="tool_use"))
    async with clients(gw) as client:
        first = await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT, tools=[WEATHER],
                                tool_choice="required")
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me check."
        [call] = choice.message.tool_calls
        assert (call.id, call.function.name, json.loads(call.function.arguments)) == \
            ("tooluse_1", "get_weather", {"city": "Paris"})
        assert fake.last.body["toolConfig"] == {"tools": [{"toolSpec": {
            "name": "get_weather", "description": "Weather in a city",
            "inputSchema": {"json": WEATHER["function"]["parameters"]}}}], "toolChoice": {"any": {}}}
        history = [*PROMPT, choice.message.model_dump(exclude_none=True),
                   {"role": "tool", "tool_call_id": call.id, "content": '{"temp": "18C"}'}]
        await in_thread(client.chat.completions.create, model=MODEL, messages=history, tools=[WEATHER])
    assert fake.last.body["messages"][1:] == [
        {"role": "assistant", "content": [{"text": "Let me check."}, {"toolUse": {
            "toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_1",
                                                     "content": [{"text": '{"temp": "18C"}'}]}}]}]


async def test_a_streamed_tool_call_arrives_as_tool_call_deltas(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    fake.script.append(Reply(content=[{"toolUse": {"toolUseId": "tu_9", "name": "get_weather",
                                                   "input": {"city": "Oslo"}}}], stop="tool_use"))
    async with clients(gw) as client:
        chunks = await in_thread(lambda: list(client.chat.completions.create(
            model=MODEL, messages=PROMPT, tools=[WEATHER], stream=True)))
    deltas = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert deltas[0].id == "tu_9" and deltas[0].function.name == "get_weather"
    assert json.loads("".join(d.function.arguments for d in deltas)) == {"city": "Oslo"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_an_image_is_sent_as_its_bytes_and_an_image_url_is_refused(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    image = "data:image/png;base64," + base64.b64encode(b"\x89PNG fake").decode()
    async with clients(gw) as client:
        await in_thread(client.chat.completions.create, model=MODEL, messages=[{"role": "user", "content": [
            {"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": image}}]}])
        assert fake.last.body["messages"][0]["content"][1] == {
            "image": {"format": "png", "source": {"bytes": image.split(",", 1)[1]}}}
        with pytest.raises(openai.BadRequestError) as caught:
            await in_thread(client.chat.completions.create, model=MODEL, messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}])
    assert caught.value.body["param"] == "messages[0].content[0].image_url.url"


async def test_the_anthropic_door_reaches_a_bedrock_backend_buffered_and_streamed(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    fake.script += [Reply(), Reply(content=[{"text": "a b"}])]
    with anthropic.Anthropic(base_url=gw.url + "/anthropic", api_key="x", max_retries=0, timeout=10) as client:
        message = await in_thread(client.messages.create, model=MODEL, max_tokens=64, system="Be brief.",
                                  messages=PROMPT)

        def stream():
            with client.messages.stream(model=MODEL, max_tokens=64, messages=PROMPT) as s:
                return "".join(s.text_stream), s.get_final_message()

        text, final = await in_thread(stream)
    assert message.content[0].text == "Hello from bedrock." and message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (9, 5)
    assert text == "a b" and final.stop_reason == "end_turn"
    assert fake.seen[-2].body["system"] == [{"text": "Be brief."}]


async def test_the_responses_door_reaches_a_bedrock_backend_as_chat(start_gateway, fake):
    """Bedrock has no Responses API: /v1/responses is sent to it as a chat call (a signed Converse call)
    and answered as a Response object or the Responses event stream."""
    gw = await start_gateway(config(bedrock(fake)))
    fake.script += [Reply(), Reply(content=[{"text": "a "}, {"text": "b"}])]
    async with clients(gw) as client:
        answer = await in_thread(client.responses.create, model=MODEL, input="hi", instructions="Be brief.")
        events = await in_thread(lambda: list(client.responses.create(model=MODEL, input="hi", stream=True)))
    assert answer.status == "completed" and answer.output_text == "Hello from bedrock." and answer.model == MODEL
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (9, 5)
    assert fake.seen[0].signed and fake.seen[0].body["system"] == [{"text": "Be brief."}]
    assert events[-1].type == "response.completed" and events[-1].response.output_text == "a b"


@pytest.mark.parametrize(("exception", "bedrock_status", "status", "error"), [
    ("ValidationException", 400, 400, openai.BadRequestError),
    ("AccessDeniedException", 403, 403, openai.PermissionDeniedError),
    ("ServiceUnavailableException", 503, 503, openai.InternalServerError),
    ("ModelNotReadyException", 429, 503, openai.InternalServerError),
])
async def test_bedrock_exceptions_map_into_the_error_taxonomy(start_gateway, fake, exception, bedrock_status,
                                                              status, error):
    gw = await start_gateway(config(bedrock(fake)))
    fake.script.append(Reply(status=bedrock_status, error=exception, message="it went wrong"))
    async with clients(gw) as client:
        with pytest.raises(error) as caught:
            await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT)
    assert caught.value.status_code == status
    assert caught.value.body["code"] == exception and "it went wrong" in caught.value.body["message"]


async def test_an_unknown_model_is_resource_not_found_404(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake, models=["nope"], model_configs=[])))
    async with clients(gw) as client:
        with pytest.raises(openai.NotFoundError) as caught:
            await in_thread(client.chat.completions.create, model="nope", messages=PROMPT)
    assert caught.value.body["code"] == "ResourceNotFoundException"


async def test_throttling_is_a_429_with_its_retry_hint(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    fake.script.append(Reply(status=429, error="ThrottlingException", message="Too many requests", retry_after="7"))
    async with clients(gw) as client:
        with pytest.raises(openai.RateLimitError) as caught:
            await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT)
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body["code"] == "ThrottlingException"


async def test_a_wrong_secret_is_refused_by_the_signature_check(start_gateway, fake, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    gw = await start_gateway(config(bedrock(fake)))
    async with clients(gw) as client:
        with pytest.raises(openai.PermissionDeniedError) as caught:
            await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT)
    assert caught.value.body["code"] == "InvalidSignatureException" and not fake.last.signed


async def test_a_bedrock_api_key_is_sent_as_a_bearer_token_unsigned(start_gateway, fake, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    gw = await start_gateway(config(bedrock(fake, api_key=API_KEY)))
    async with clients(gw) as client:
        reply = await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT)
    assert reply.choices[0].message.content == "Hello from bedrock."
    assert fake.last.headers["authorization"] == f"Bearer {API_KEY}" and "x-amz-date" not in fake.last.headers


async def test_no_credentials_fails_the_attempt_over_to_a_sibling(start_gateway, fake, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    sim = {**backend("sim", text="from the simulator"), "models": [MODEL]}
    gw = await start_gateway(config(bedrock(fake), sim))
    async with clients(gw) as client:
        for _ in range(2):
            reply = await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT)
            assert reply.choices[0].message.content == "from the simulator"
    assert not fake.seen


async def test_a_503_fails_over_from_bedrock_before_the_first_byte(start_gateway, fake):
    sim = {**backend("sim", text="from the simulator"), "models": [MODEL]}
    gw = await start_gateway(config(bedrock(fake), sim))
    fake.script += [Reply(status=503, error="ServiceUnavailableException")] * 4
    async with clients(gw) as client:
        for stream in (False, True, False, True):
            if stream:
                text = text_of(await in_thread(lambda: list(client.chat.completions.create(
                    model=MODEL, messages=PROMPT, stream=True))))
            else:
                text = (await in_thread(client.chat.completions.create, model=MODEL,
                                        messages=PROMPT)).choices[0].message.content
            assert text == "from the simulator"


async def test_an_exception_frame_before_any_content_fails_over(start_gateway, fake):
    sim = {**backend("sim", text="from the simulator"), "models": [MODEL]}
    gw = await start_gateway(config(bedrock(fake), sim))
    fake.script += [Reply(stream_exception="throttlingException", message="slow down")] * 2
    async with clients(gw) as client:
        for _ in range(2):
            chunks = await in_thread(lambda: list(client.chat.completions.create(model=MODEL, messages=PROMPT,
                                                                                 stream=True)))
            assert text_of(chunks) == "from the simulator"


async def test_a_failing_backend_fails_over_to_bedrock_buffered_and_streamed(start_gateway, fake):
    broken = {**backend("sim", failure={"status": 503}), "models": [MODEL]}
    gw = await start_gateway(config(broken, bedrock(fake)))
    async with clients(gw) as client:
        texts = []
        for _ in range(2):
            texts.append((await in_thread(client.chat.completions.create, model=MODEL,
                                          messages=PROMPT)).choices[0].message.content)
            chunks = await in_thread(lambda: list(client.chat.completions.create(model=MODEL, messages=PROMPT,
                                                                                 stream=True)))
            texts.append(text_of(chunks))
    assert texts == ["Hello from bedrock."] * 4


async def test_the_first_byte_budget_ends_a_silent_bedrock_stream_and_fails_over(start_gateway, fake):
    sim = {**backend("sim", text="from the simulator"), "models": [MODEL]}
    gw = await start_gateway(config(bedrock(fake), sim,
                                    timeouts={"request": {"streaming": {"first_byte": "300ms"}}}))
    fake.script += [Reply(delay=3.0)] * 2
    async with clients(gw) as client:
        for _ in range(2):
            chunks = await in_thread(lambda: list(client.chat.completions.create(model=MODEL, messages=PROMPT,
                                                                                 stream=True)))
            assert text_of(chunks) == "from the simulator"


async def test_the_chunk_interval_budget_ends_a_stalled_bedrock_stream(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake), timeouts={"request": {"streaming": {"chunk_interval": "300ms"}}}))
    fake.script.append(Reply(content=[{"text": "one two"}], gap=3.0))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True})
    last = json.loads(reply.text.strip().split("\n\n")[-1][len("data: "):])
    assert last["error"]["details"]["timeout"] == "chunk_interval" and "[DONE]" not in reply.text


async def test_a_stream_cut_inside_a_frame_is_truncated_not_complete(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    fake.script.append(Reply(content=[{"text": "one two"}], cut=True))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True})
    assert "[DONE]" not in reply.text and "a frame cut short" in reply.text


async def test_a_broken_stream_never_continues_on_a_bedrock_backend(start_gateway, fake):
    breaking = {**backend("sim", chunks=6, failure={"reset_after_chunk": 2}), "models": [MODEL]}
    gw = await start_gateway(config(breaking, bedrock(fake), streaming={"mid_stream_fallback": {"enabled": True}}))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True},
                                headers={"x-backend": "sim"})
    assert '"error"' in reply.text and "[DONE]" not in reply.text
    assert not fake.seen


async def test_a_bedrock_backend_is_never_health_checked_and_is_ready_at_once(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    async with httpx.AsyncClient(base_url=gw.url, timeout=10) as http:
        assert (await http.get("/ready")).status_code == 200
    assert not fake.seen


async def test_a_profile_of_the_shared_files_signs_a_backend_that_names_it(start_gateway, monkeypatch, tmp_path):
    (tmp_path / "creds").write_text("[bedrock-prod]\naws_access_key_id = AKPROFILE\naws_secret_access_key = psecret\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "creds"))
    async with running(FakeBedrock(credentials={"AKPROFILE": ("psecret", None)})) as fake:
        gw = await start_gateway(config(bedrock(fake, aws_profile="bedrock-prod")))
        async with clients(gw) as client:
            reply = await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT)
    assert reply.choices[0].message.content == "Hello from bedrock." and fake.last.signed


async def test_container_role_credentials_sign_with_their_session_token(start_gateway, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    async with running_endpoints(FakeCredentialEndpoints(token="Bearer ecs")) as endpoint:
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.url + "/creds")
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer ecs")
        async with running(FakeBedrock(credentials={"AKID1": ("secret1", "token1")})) as fake:
            gw = await start_gateway(config(bedrock(fake)))
            async with clients(gw) as client:
                for _ in range(2):
                    reply = await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT)
                    assert reply.choices[0].message.content == "Hello from bedrock."
    assert fake.last.signed and fake.last.headers["x-amz-security-token"] == "token1"
    assert endpoint.issued == 1   # fetched once, then cached


async def test_a_messages_client_gets_tool_use_and_sends_an_image_and_tool_result(start_gateway, fake):
    gw = await start_gateway(config(bedrock(fake)))
    fake.script.append(Reply(content=[{"toolUse": {"toolUseId": "tu_1", "name": "get_weather",
                                                   "input": {"city": "Rome"}}}], stop="tool_use"))
    tool = {"name": "get_weather", "description": "Weather in a city",
            "input_schema": WEATHER["function"]["parameters"]}
    png = base64.b64encode(b"\x89PNG fake").decode()
    question = {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
        {"type": "text", "text": "Weather where this photo was taken?"}]}
    with anthropic.Anthropic(base_url=gw.url + "/anthropic", api_key="x", max_retries=0, timeout=10) as client:
        first = await in_thread(client.messages.create, model=MODEL, max_tokens=64, tools=[tool],
                                messages=[question])
        [use] = first.content
        assert (first.stop_reason, use.type, use.id, use.input) == ("tool_use", "tool_use", "tu_1", {"city": "Rome"})
        assert fake.last.body["messages"][0]["content"][0] == {"image": {"format": "png", "source": {"bytes": png}}}
        await in_thread(client.messages.create, model=MODEL, max_tokens=64, tools=[tool], messages=[
            question, {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "sunny"}]}])
    assert fake.last.body["messages"][2] == {"role": "user", "content": [
        {"toolResult": {"toolUseId": "tu_1", "content": [{"text": "sunny"}]}}]}
