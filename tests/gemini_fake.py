"""A fake Gemini API on a real socket (127.0.0.1), for the gemini backend's tests.

It speaks the documented REST wire of the Generative Language API, v1beta:
``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent?alt=sse``
(each event a partial ``GenerateContentResponse``, events ended by CRLF CRLF,
the last one carrying ``finishReason`` and ``usageMetadata``), ``:embedContent``,
``:batchEmbedContents`` and ``GET /v1beta/models`` (``pageSize``/``pageToken``,
``nextPageToken``). The key comes in ``x-goog-api-key``; a wrong one is
Google's 400 ``API_KEY_INVALID``. Bodies are checked as strictly as Google's
JSON parser does: an unknown field is its 400 ``INVALID_ARGUMENT`` "Unknown
name", a role other than ``user``/``model`` its 400, each part one kind of
data. Errors are Google's shape: ``{"error": {"code", "message", "status",
"details"}}``. Replies are scripted per test (``script``), and every request
is recorded (``seen``).
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator
from urllib.parse import parse_qs

import attrs
import trio

from tests.servers import lifespan, request_body, serving

KEY = "gm-test-key"
# GenerateContentRequest's fields, camelCase and snake_case as the JSON parser takes both
REQUEST_FIELDS = {"contents", "systemInstruction", "system_instruction", "tools", "toolConfig", "tool_config",
                  "generationConfig", "generation_config", "safetySettings", "safety_settings", "cachedContent",
                  "cached_content", "labels"}
PART_DATA = {"text", "inlineData", "inline_data", "fileData", "file_data", "functionCall", "function_call",
             "functionResponse", "function_response", "executableCode", "codeExecutionResult"}
PART_META = {"thought", "thoughtSignature", "thought_signature", "videoMetadata"}
GENERATION_FIELDS = {"stopSequences", "responseMimeType", "responseSchema", "responseJsonSchema", "candidateCount",
                     "maxOutputTokens", "temperature", "topP", "topK", "seed", "presencePenalty", "frequencyPenalty",
                     "responseLogprobs", "logprobs", "thinkingConfig", "responseModalities"}


@attrs.define
class Reply:
    """One scripted answer: ``parts`` of the candidate, or an error ``status`` with Google's body."""

    parts: list[dict[str, Any]] = attrs.Factory(lambda: [{"text": "Hello from gemini."}])
    finish: str | None = "STOP"
    status: int = 200
    error: dict[str, Any] | None = None        # Google's error object, with status != 200
    prompt_block: str | None = None            # promptFeedback.blockReason
    delay: float = 0.0                         # before the answer (or the stream's first event)
    gap: float = 0.0                           # between stream events
    cut: bool = False                          # a stream that ends without its last event
    usage: dict[str, Any] = attrs.Factory(lambda: {"promptTokenCount": 7, "candidatesTokenCount": 4,
                                                   "totalTokenCount": 11})


def google_error(code: int, status: str, message: str, *details: dict[str, Any]) -> Reply:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return Reply(status=code, error=error)


@attrs.define
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


class FakeGemini:
    def __init__(self, models: list[str] | None = None, page_size: int = 2) -> None:
        self.models = models or ["gemini-2.5-flash", "gemini-2.5-pro", "text-embedding-004"]
        self.page_size = page_size      # pages as short as this, to make the client follow nextPageToken
        self.script: list[Reply] = []
        self.seen: list[Seen] = []
        self.url = ""

    @property
    def last(self) -> Seen:
        return [s for s in self.seen if s.method == "POST"][-1]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        raw = await request_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        query = parse_qs(scope["query_string"].decode())
        body = json.loads(raw) if raw else None
        self.seen.append(Seen(scope["method"], scope["path"], query, headers, body))
        status, out, stream = await self.answer(scope["method"], scope["path"], query, headers, body)
        if stream is None:
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json; charset=UTF-8")]})
            await send({"type": "http.response.body", "body": json.dumps(out).encode()})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for gap, event in stream:
            await trio.sleep(gap)
            await send({"type": "http.response.body", "body": b"data: " + json.dumps(event).encode() + b"\r\n\r\n",
                        "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def answer(self, method: str, path: str, query: dict, headers: dict, body: Any
                     ) -> tuple[int, Any, list | None]:
        if headers.get("x-goog-api-key") != KEY:
            return 400, _err(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                             {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                              "domain": "googleapis.com"}), None
        if method == "GET" and path == "/v1beta/models":
            return 200, self.listing(query), None
        if method != "POST" or not path.startswith("/v1beta/models/") or ":" not in path:
            return 404, _err(404, "NOT_FOUND", f"Method not found: {path}"), None
        model, verb = path[len("/v1beta/models/"):].rsplit(":", 1)
        if model not in self.models:
            return 404, _err(404, "NOT_FOUND", f"models/{model} is not found for API version v1beta, or is not "
                                               f"supported for generateContent."), None
        if verb in ("embedContent", "batchEmbedContents"):
            return self.embed(verb, model, body)
        problem = check_request(body)
        if problem:
            return 400, _err(400, "INVALID_ARGUMENT", problem), None
        reply = self.script.pop(0) if self.script else Reply()
        await trio.sleep(reply.delay)
        if reply.error is not None:
            return reply.status, {"error": reply.error}, None
        if verb == "generateContent":
            return 200, self.whole(reply, model), None
        if verb == "streamGenerateContent" and query.get("alt") == ["sse"]:
            return 200, None, self.events(reply, model)
        return 404, _err(404, "NOT_FOUND", f"Method not found: {verb}"), None

    def whole(self, reply: Reply, model: str) -> dict[str, Any]:
        out: dict[str, Any] = {"usageMetadata": reply.usage, "modelVersion": model, "responseId": "resp-fake-1"}
        if reply.prompt_block:
            out["promptFeedback"] = {"blockReason": reply.prompt_block,
                                     "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT",
                                                        "probability": "HIGH"}]}
            return out
        candidate: dict[str, Any] = {"index": 0}
        if reply.parts:
            candidate["content"] = {"parts": reply.parts, "role": "model"}
        if reply.finish:
            candidate["finishReason"] = reply.finish
        out["candidates"] = [candidate]
        return out

    def events(self, reply: Reply, model: str) -> list[tuple[float, dict[str, Any]]]:
        if reply.prompt_block:
            return [(0.0, self.whole(reply, model))]
        out = []
        for part in reply.parts:
            out.append({"candidates": [{"content": {"parts": [part], "role": "model"}, "index": 0}],
                        "usageMetadata": {"promptTokenCount": reply.usage["promptTokenCount"],
                                          "totalTokenCount": reply.usage["promptTokenCount"]},
                        "modelVersion": model, "responseId": "resp-fake-1"})
        last = {"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "index": 0}],
                "usageMetadata": reply.usage, "modelVersion": model, "responseId": "resp-fake-1"}
        if reply.finish:
            last["candidates"][0]["finishReason"] = reply.finish
        if not reply.cut:
            out.append(last)
        return [(reply.gap if i else 0.0, e) for i, e in enumerate(out)]

    def listing(self, query: dict) -> dict[str, Any]:
        size = min(int(query.get("pageSize", ["50"])[0]), self.page_size)
        start = int(query.get("pageToken", ["0"])[0])
        page = self.models[start:start + size]
        out: dict[str, Any] = {"models": [{"name": f"models/{m}", "displayName": m, "version": "001",
                                           "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
                                           "supportedGenerationMethods": ["generateContent", "countTokens"]}
                                          for m in page]}
        if start + size < len(self.models):
            out["nextPageToken"] = str(start + size)
        return out

    def embed(self, verb: str, model: str, body: Any) -> tuple[int, Any, None]:
        reply = self.script.pop(0) if self.script else None
        if reply is not None and reply.error is not None:
            return reply.status, {"error": reply.error}, None
        requests = [body] if verb == "embedContent" else body.get("requests", [])
        vectors = []
        for r in requests:
            if verb == "batchEmbedContents" and r.get("model") != f"models/{model}":
                return 400, _err(400, "INVALID_ARGUMENT", "Model in request must match the batch's model"), None
            text = "".join(p.get("text", "") for p in r["content"]["parts"])
            size = r.get("outputDimensionality") or 4
            vectors.append({"values": [round(len(text) / (i + 1), 3) for i in range(size)]})
        return 200, ({"embedding": vectors[0]} if verb == "embedContent" else {"embeddings": vectors}), None


def _err(code: int, status: str, message: str, *details: dict[str, Any]) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return {"error": error}


def check_request(body: Any) -> str | None:
    """Google's 400 message for a GenerateContentRequest its parser refuses, or None."""
    if not isinstance(body, dict):
        return "Invalid JSON payload received."
    for key in body:
        if key not in REQUEST_FIELDS:
            return f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.'
    for key in body.get("generationConfig") or {}:
        if key not in GENERATION_FIELDS:
            return f'Invalid JSON payload received. Unknown name "{key}" at \'generation_config\': Cannot find field.'
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified"
    for i, content in enumerate(contents):
        if content.get("role") not in ("user", "model"):
            return f"Please use a valid role: user, model. (contents[{i}])"
        for j, part in enumerate(content.get("parts") or []):
            kinds = set(part) & PART_DATA
            if len(kinds) != 1 or set(part) - PART_DATA - PART_META:
                return f"* GenerateContentRequest.contents[{i}].parts[{j}].data: required oneof field 'data' " \
                       f"must have one initialized field"
    return None


@asynccontextmanager
async def running(fake: FakeGemini) -> AsyncIterator[FakeGemini]:
    """``fake`` served on a free port of 127.0.0.1 until the block ends."""
    async with serving(fake) as url:
        fake.url = url
        yield fake
