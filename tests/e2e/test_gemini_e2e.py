"""End-to-end: a native gemini backend (a fake Gemini API on a real socket, ``tests/gemini_fake.py``)
behind a real Switchyard, through every door with the official SDKs. One test per rule."""

from __future__ import annotations

import base64
import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import anthropic
import httpx
import openai
import pytest
import trio

from tests.e2e.support import Gateway, backend, gateway_config, in_thread
from tests.gemini_fake import KEY, FakeGemini, Reply, google_error, running

MODEL = "gemini-2.5-flash"
PROMPT = [{"role": "user", "content": "hi"}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def gemini(fake: FakeGemini, name: str = "gem", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "gemini", "url": fake.url, "api_key": KEY, **extra}


@pytest.fixture
async def fake() -> AsyncIterator[FakeGemini]:
    async with running(FakeGemini()) as server:
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


async def test_a_chat_call_is_sent_as_generate_content_and_answered_as_a_chat_completion(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    async with clients(gw) as client:
        reply = await in_thread(client.chat.completions.create, model=MODEL, max_tokens=50, temperature=0.2,
                                messages=[{"role": "system", "content": "Be brief."}, *PROMPT,
                                          {"role": "assistant", "content": "Hello."},
                                          {"role": "user", "content": "Again"}])
    assert reply.choices[0].message.content == "Hello from gemini."
    assert reply.choices[0].finish_reason == "stop" and reply.model == MODEL
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (7, 4, 11)
    seen = fake.last
    assert seen.path == f"/v1beta/models/{MODEL}:generateContent" and seen.headers["x-goog-api-key"] == KEY
    assert "authorization" not in seen.headers
    assert seen.body == {"contents": [{"role": "user", "parts": [{"text": "hi"}]},
                                      {"role": "model", "parts": [{"text": "Hello."}]},
                                      {"role": "user", "parts": [{"text": "Again"}]}],
                         "systemInstruction": {"parts": [{"text": "Be brief."}]},
                         "generationConfig": {"maxOutputTokens": 50, "temperature": 0.2}}


async def test_a_streamed_chat_call_is_sent_as_stream_generate_content_with_sse(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    fake.script.append(Reply(parts=[{"text": "one "}, {"text": "two "}, {"text": "three"}]))
    async with clients(gw) as client:
        def run():
            stream = client.chat.completions.create(model=MODEL, messages=PROMPT, stream=True,
                                                    stream_options={"include_usage": True})
            return list(stream)
        chunks = await in_thread(run)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 11
    assert fake.last.path == f"/v1beta/models/{MODEL}:streamGenerateContent" and fake.last.query == {"alt": ["sse"]}


async def test_a_stream_shows_no_usage_chunk_unless_asked_but_the_ledger_reads_it(start_gateway, fake, tmp_path):
    gw = await start_gateway(config(gemini(fake), admin={"token": "admin-token-0123456789"},
                                    server={"bind_address": "127.0.0.1:8080", "max_body_bytes": 65536,
                                            "data_dir": str(tmp_path)}, usage={"flush_interval": "100ms"}))
    async with httpx.AsyncClient(base_url=gw.url, timeout=10) as http:
        reply = await http.post("/v1/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True})
        events = [e for e in reply.text.split("\n\n") if e.startswith("data: ")]
        assert events[-1] == "data: [DONE]" and not any('"usage"' in e for e in events)
        record = None
        with trio.fail_after(5):
            while record is None:
                found = await http.get(f"/admin/usage/requests/{reply.headers['x-continuum-request-id']}",
                                       headers={"authorization": "Bearer admin-token-0123456789"})
                record = found.json() if found.status_code == 200 else await trio.sleep(0.05)
    assert (record["input_tokens"], record["output_tokens"], record["estimated"]) == (7, 4, False)
    assert "stream_options" not in fake.last.body


async def test_tools_round_trip_as_function_call_and_function_response(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    signature = base64.b64encode(b"\x01\xfe signed thought").decode()
    fake.script.append(Reply(parts=[{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                                     "thoughtSignature": signature}]))
    async with clients(gw) as client:
        first = await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT, tools=[WEATHER],
                                tool_choice="required")
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        [call] = choice.message.tool_calls
        assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
        assert fake.last.body["tools"] == [{"functionDeclarations": [
            {"name": "get_weather", "description": "Weather in a city",
             "parameters": WEATHER["function"]["parameters"]}]}]
        assert fake.last.body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
        history = [*PROMPT, choice.message.model_dump(exclude_none=True),
                   {"role": "tool", "tool_call_id": call.id, "content": '{"temp": "18C"}'}]
        await in_thread(client.chat.completions.create, model=MODEL, messages=history, tools=[WEATHER])
    assert fake.last.body["contents"][1:] == [
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                                     "thoughtSignature": signature}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": "18C"}}}]}]


async def test_a_streamed_function_call_arrives_as_one_tool_call_delta(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    fake.script.append(Reply(parts=[{"text": "Checking."},
                                    {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]))
    async with clients(gw) as client:
        chunks = await in_thread(lambda: list(client.chat.completions.create(
            model=MODEL, messages=PROMPT, tools=[WEATHER], stream=True)))
    calls = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert len(calls) == 1 and calls[0].index == 0 and calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"city": "Oslo"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_an_image_goes_inline_and_a_json_schema_as_the_response_schema(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    image = "data:image/png;base64," + base64.b64encode(b"\x89PNG fake").decode()
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    async with clients(gw) as client:
        await in_thread(client.chat.completions.create, model=MODEL, messages=[{"role": "user", "content": [
            {"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": image}}]}],
            response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}})
    assert fake.last.body["contents"][0]["parts"][1] == {"inlineData": {"mimeType": "image/png",
                                                                        "data": image.split(",", 1)[1]}}
    assert fake.last.body["generationConfig"] == {"responseMimeType": "application/json", "responseSchema": schema}


async def test_thought_parts_come_back_as_reasoning_content(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    fake.script.append(Reply(parts=[{"text": "Let me think.", "thought": True}, {"text": "42"}],
                             usage={"promptTokenCount": 3, "candidatesTokenCount": 1, "thoughtsTokenCount": 5,
                                    "totalTokenCount": 9}))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = (await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT,
                                                            "reasoning_effort": "low"})).json()
    message = reply["choices"][0]["message"]
    assert (message["content"], message["reasoning_content"]) == ("42", "Let me think.")
    assert reply["usage"]["completion_tokens"] == 6
    assert reply["usage"]["completion_tokens_details"] == {"reasoning_tokens": 5}
    assert fake.last.body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 1024, "includeThoughts": True}


async def test_the_anthropic_door_reaches_a_gemini_backend_buffered_and_streamed(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    fake.script += [Reply(), Reply(parts=[{"text": "a "}, {"text": "b"}])]
    with anthropic.Anthropic(base_url=gw.url + "/anthropic", api_key="x", max_retries=0, timeout=10) as client:
        message = await in_thread(client.messages.create, model=MODEL, max_tokens=64, system="Be brief.",
                                  messages=PROMPT)

        def stream():
            with client.messages.stream(model=MODEL, max_tokens=64, messages=PROMPT) as s:
                return "".join(s.text_stream), s.get_final_message()

        text, final = await in_thread(stream)
    assert message.content[0].text == "Hello from gemini." and message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 4
    assert text == "a b" and final.stop_reason == "end_turn"
    assert fake.seen[-2].body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}


async def test_the_responses_door_reaches_a_gemini_backend_as_chat(start_gateway, fake):
    """Gemini has no Responses API: /v1/responses is sent to it as a chat call (generateContent) and
    answered as a Response object or the Responses event stream."""
    gw = await start_gateway(config(gemini(fake, models=[MODEL])))
    fake.script += [Reply(), Reply(parts=[{"text": "a "}, {"text": "b"}])]
    async with clients(gw) as client:
        answer = await in_thread(client.responses.create, model=MODEL, input="hi", instructions="Be brief.",
                                 max_output_tokens=64)

        def stream():
            with client.responses.stream(model=MODEL, input="hi") as s:
                return s.get_final_response()

        final = await in_thread(stream)
    assert answer.status == "completed" and answer.output_text == "Hello from gemini."
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (7, 4)
    assert fake.seen[-2].body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert final.output_text == "a b" and final.status == "completed"


async def test_a_429_resource_exhausted_is_a_429_with_its_retry_delay(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    fake.script.append(google_error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.",
                                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}))
    async with clients(gw) as client:
        with pytest.raises(openai.RateLimitError) as caught:
            await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT)
    assert caught.value.response.headers["retry-after"] == "37"
    error = caught.value.body
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "rate_limit_error"
    assert error["details"] == {"status": "RESOURCE_EXHAUSTED", "retry_delay": "37s"}
    assert error["message"] == "Gemini RESOURCE_EXHAUSTED: You exceeded your current quota."


@pytest.mark.parametrize("status, google, code", [
    (400, "INVALID_ARGUMENT", "invalid_argument"), (403, "PERMISSION_DENIED", "permission_denied"),
    (404, "NOT_FOUND", "model_not_found")])
async def test_a_client_error_is_mapped_into_the_taxonomy(start_gateway, fake, status, google, code):
    gw = await start_gateway(config(gemini(fake)))
    message = "models/x is not found" if google == "NOT_FOUND" else "Request contains an invalid argument."
    fake.script.append(google_error(status, google, message))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT})
    assert reply.status_code == status and reply.json()["error"]["code"] == code
    assert reply.json()["error"]["details"]["status"] == google


async def test_a_400_invalid_argument_is_not_failed_over(start_gateway, fake):
    sim = {**backend("sim"), "models": [MODEL]}
    gw = await start_gateway(config(gemini(fake, models=[MODEL]), sim))
    fake.script.append(google_error(400, "INVALID_ARGUMENT", "Request contains an invalid argument."))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT},
                                headers={"x-backend": "gem"})
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "invalid_argument"


async def test_a_503_unavailable_fails_over_before_the_first_byte(start_gateway, fake):
    sim = {**backend("sim", text="from the simulator"), "models": [MODEL]}
    gw = await start_gateway(config(gemini(fake, models=[MODEL]), sim, selection_strategy="RoundRobin"))
    fake.script += [google_error(503, "UNAVAILABLE", "The model is overloaded.")] * 4
    async with clients(gw) as client:
        for stream in (False, True, False, True):
            if stream:
                chunks = await in_thread(lambda: list(client.chat.completions.create(
                    model=MODEL, messages=PROMPT, stream=True)))
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            else:
                text = (await in_thread(client.chat.completions.create, model=MODEL,
                                        messages=PROMPT)).choices[0].message.content
            assert text == "from the simulator"


async def test_a_failing_backend_fails_over_to_gemini_buffered_and_streamed(start_gateway, fake):
    broken = {**backend("sim", failure={"status": 503}), "models": [MODEL]}
    gw = await start_gateway(config(broken, gemini(fake, models=[MODEL]), selection_strategy="RoundRobin"))
    async with clients(gw) as client:
        texts = []
        for _ in range(2):
            texts.append((await in_thread(client.chat.completions.create, model=MODEL,
                                          messages=PROMPT)).choices[0].message.content)
            chunks = await in_thread(lambda: list(client.chat.completions.create(model=MODEL, messages=PROMPT,
                                                                                 stream=True)))
            texts.append("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
    assert texts == ["Hello from gemini."] * 4


async def test_a_blocked_prompt_is_a_400_content_policy_refusal_buffered_and_streamed(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    fake.script += [Reply(prompt_block="SAFETY"), Reply(prompt_block="PROHIBITED_CONTENT")]
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        buffered = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT})
        streamed = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True})
    for reply, reason in ((buffered, "SAFETY"), (streamed, "PROHIBITED_CONTENT")):
        assert reply.status_code == 400 and reply.headers["content-type"].startswith("application/json")
        error = reply.json()["error"]
        assert error["code"] == "content_policy_violation" and error["details"] == {"block_reason": reason}


async def test_an_answer_stopped_for_safety_after_output_ends_with_content_filter(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    fake.script += [Reply(parts=[{"text": "Once upon"}], finish="SAFETY"), Reply(parts=[], finish="SAFETY")]
    async with clients(gw) as client:
        chunks = await in_thread(lambda: list(client.chat.completions.create(model=MODEL, messages=PROMPT,
                                                                             stream=True)))
        assert chunks[-1].choices[0].finish_reason == "content_filter"
        with pytest.raises(openai.BadRequestError) as caught:
            await in_thread(client.chat.completions.create, model=MODEL, messages=PROMPT)
    assert caught.value.body["code"] == "content_policy_violation"


async def test_embeddings_go_to_embed_content_and_batch_embed_contents(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    async with clients(gw) as client:
        one = await in_thread(client.embeddings.create, model="text-embedding-004", input="abcd")   # base64 wire
        many = await in_thread(client.embeddings.create, model="text-embedding-004", input=["ab", "abcdef"],
                               dimensions=2, encoding_format="float")
    assert one.data[0].embedding == pytest.approx([4.0, 2.0, 1.333, 1.0], abs=1e-3)
    assert fake.seen[-2].path == "/v1beta/models/text-embedding-004:embedContent"
    assert fake.seen[-2].body == {"content": {"parts": [{"text": "abcd"}]}}
    assert [d.embedding for d in many.data] == [[2.0, 1.0], [6.0, 3.0]] and many.model == "text-embedding-004"
    assert fake.last.path == "/v1beta/models/text-embedding-004:batchEmbedContents"
    assert fake.last.body["requests"][1] == {"model": "models/text-embedding-004",
                                             "content": {"parts": [{"text": "abcdef"}]}, "outputDimensionality": 2}


async def test_the_model_list_is_read_from_every_page_without_the_models_prefix(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    async with clients(gw) as client:
        listed = await in_thread(client.models.list)
    assert {m.id for m in listed.data} == {"gemini-2.5-flash", "gemini-2.5-pro", "text-embedding-004"}
    pages = [s for s in fake.seen if s.path == "/v1beta/models" and "pageToken" in s.query]
    assert pages and all(s.headers["x-goog-api-key"] == KEY for s in fake.seen)


async def test_an_upstream_id_is_the_models_segment_of_the_url(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake, discovery=False, models=["flash"],
                                           model_configs=[{"id": "flash", "upstream_id": MODEL}])))
    async with clients(gw) as client:
        reply = await in_thread(client.chat.completions.create, model="flash", messages=PROMPT)
    assert reply.model == "flash" and fake.last.path == f"/v1beta/models/{MODEL}:generateContent"


async def test_the_first_byte_budget_ends_a_silent_gemini_stream_and_fails_over(start_gateway, fake):
    sim = {**backend("sim", text="from the simulator"), "models": [MODEL]}
    gw = await start_gateway(config(gemini(fake, models=[MODEL]), sim, selection_strategy="RoundRobin",
                                    timeouts={"request": {"streaming": {"first_byte": "300ms"}}}))
    fake.script += [Reply(delay=3.0)] * 2
    async with clients(gw) as client:
        for _ in range(2):
            chunks = await in_thread(lambda: list(client.chat.completions.create(model=MODEL, messages=PROMPT,
                                                                                 stream=True)))
            assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "from the simulator"


async def test_the_chunk_interval_budget_ends_a_stalled_gemini_stream(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake), timeouts={"request": {"streaming": {"chunk_interval": "300ms"}}}))
    fake.script.append(Reply(parts=[{"text": "one "}, {"text": "two"}], gap=3.0))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True})
    last = json.loads(reply.text.strip().split("\n\n")[-1][len("data: "):])
    assert last["error"]["details"]["timeout"] == "chunk_interval" and "[DONE]" not in reply.text


async def test_a_stream_cut_before_its_finish_reason_is_truncated_not_complete(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    fake.script.append(Reply(parts=[{"text": "one "}, {"text": "two"}], cut=True))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True})
    assert "[DONE]" not in reply.text and "upstream_stream_truncated" in reply.text


async def test_a_broken_stream_never_continues_on_a_gemini_backend(start_gateway, fake):
    breaking = {**backend("sim", chunks=6, failure={"reset_after_chunk": 2}), "models": [MODEL]}
    gw = await start_gateway(config(breaking, gemini(fake, models=[MODEL]), selection_strategy="RoundRobin",
                                    streaming={"mid_stream_fallback": {"enabled": True}}))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True},
                                headers={"x-backend": "sim"})
    assert '"error"' in reply.text and "[DONE]" not in reply.text
    assert not [s for s in fake.seen if s.method == "POST"]


async def test_health_checks_ask_the_model_list_with_the_key(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    async with httpx.AsyncClient(base_url=gw.url, timeout=10) as http:
        assert (await http.get("/ready")).status_code == 200
    assert any(s.method == "GET" and s.path == "/v1beta/models" for s in fake.seen)


async def test_an_alias_dispatched_as_its_canonical_id_rewrites_the_models_segment(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake, model_configs=[{"id": MODEL, "aliases": ["flash-latest"]}])))
    async with clients(gw) as client:
        reply = await in_thread(client.chat.completions.create, model="flash-latest", messages=PROMPT)
    assert reply.choices[0].message.content == "Hello from gemini."
    assert fake.last.path == f"/v1beta/models/{MODEL}:generateContent"


async def test_the_total_budget_ends_a_slow_gemini_stream(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake), timeouts={"request": {"streaming": {
        "total": "1s", "chunk_interval": "5s"}}}))
    fake.script.append(Reply(parts=[{"text": "a "}, {"text": "b "}, {"text": "c"}], gap=0.6))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        reply = await http.post("/chat/completions", json={"model": MODEL, "messages": PROMPT, "stream": True})
    last = json.loads(reply.text.strip().split("\n\n")[-1][len("data: "):])
    assert last["error"]["details"]["timeout"] == "total" and "[DONE]" not in reply.text


async def test_a_messages_clients_tool_use_round_trips_through_a_gemini_backend(start_gateway, fake):
    gw = await start_gateway(config(gemini(fake)))
    fake.script.append(Reply(parts=[{"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}]))
    tool = {"name": "get_weather", "description": "Weather in a city",
            "input_schema": WEATHER["function"]["parameters"]}
    with anthropic.Anthropic(base_url=gw.url + "/anthropic", api_key="x", max_retries=0, timeout=10) as client:
        first = await in_thread(client.messages.create, model=MODEL, max_tokens=64, messages=PROMPT, tools=[tool])
        [use] = first.content
        assert (first.stop_reason, use.type, use.name, use.input) == ("tool_use", "tool_use", "get_weather",
                                                                     {"city": "Rome"})
        follow_up = [*PROMPT, {"role": "assistant", "content": first.content},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "21C"}]}]
        second = await in_thread(client.messages.create, model=MODEL, max_tokens=64, messages=follow_up,
                                 tools=[tool])
    assert second.content[0].text == "Hello from gemini."
    assert fake.last.body["contents"][-1] == {"role": "user", "parts": [
        {"functionResponse": {"name": "get_weather", "response": {"output": "21C"}}}]}
