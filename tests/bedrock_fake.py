"""A fake Amazon Bedrock runtime on a real socket (127.0.0.1), for the bedrock backend's tests.

It speaks the documented REST wire of the Converse API:
``POST /model/{modelId}/converse`` (a ``ConverseResponse``: ``output.message``,
``stopReason``, ``usage``, ``metrics``) and ``/converse-stream``
(``application/vnd.amazon.eventstream``: binary frames, each a prelude of
total and headers lengths with its CRC32, headers ``:message-type``,
``:event-type`` and ``:content-type`` as type-7 strings, a JSON payload and the
message CRC32; events ``messageStart``, ``contentBlockStart``,
``contentBlockDelta``, ``contentBlockStop``, ``messageStop``, ``metadata``;
an error is an ``exception`` frame with ``:exception-type``). Frames are
encoded here from the documented format, independently of the parser the
gateway uses.

Every request's SigV4 signature is verified with botocore's own signer (the
reference implementation, independent of the gateway's): an unknown key is
``UnrecognizedClientException``, a wrong signature
``InvalidSignatureException`` (403 with ``x-amzn-ErrorType``, as AWS answers).
A ``Authorization: Bearer`` Bedrock API key is checked against ``API_KEY``.
Bodies are checked like Bedrock's validator: unknown fields, content blocks
with more or less than one kind, conversations not starting with a user
turn or not alternating are ``ValidationException``. Replies are scripted per
test (``script``); every request is recorded (``seen``).
"""

from __future__ import annotations

import binascii
import json
import struct
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator
from urllib.parse import unquote

import attrs
import trio
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.servers import lifespan, request_body, serving

REGION = "us-east-1"
ACCESS_KEY, SECRET_KEY = "AKIDFAKEBEDROCK", "fake/secret+key"
API_KEY = "bedrock-api-key-fake"
REQUEST_FIELDS = {"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
                  "additionalModelRequestFields", "promptVariables", "additionalModelResponseFieldPaths",
                  "requestMetadata", "performanceConfig"}
BLOCK_KINDS = {"text", "image", "document", "video", "toolUse", "toolResult", "guardContent", "cachePoint",
               "reasoningContent"}
INFERENCE_FIELDS = {"maxTokens", "temperature", "topP", "stopSequences"}


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event stream message: prelude (lengths, CRC), headers (type 7: string), payload, message CRC."""
    raw_headers = b"".join(struct.pack("!B", len(k)) + k.encode() + struct.pack("!BH", 7, len(v.encode())) + v.encode()
                           for k, v in headers.items())
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(raw_headers))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + raw_headers + payload
    return body + struct.pack("!I", binascii.crc32(body) & 0xFFFFFFFF)


def event(kind: str, payload: dict[str, Any]) -> bytes:
    return frame({":event-type": kind, ":content-type": "application/json", ":message-type": "event"},
                 json.dumps({**payload, "p": "abcdefgh"}).encode())   # Bedrock pads events with "p"


def exception(kind: str, message: str) -> bytes:
    return frame({":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"},
                 json.dumps({"message": message}).encode())


@attrs.define
class Reply:
    """One scripted answer: content blocks, or an error (``error`` names the exception)."""

    content: list[dict[str, Any]] = attrs.Factory(lambda: [{"text": "Hello from bedrock."}])
    stop: str = "end_turn"
    usage: dict[str, Any] = attrs.Factory(lambda: {"inputTokens": 9, "outputTokens": 5, "totalTokens": 14})
    status: int = 200
    error: str | None = None            # e.g. ThrottlingException (with status)
    message: str = "error"
    retry_after: str | None = None
    delay: float = 0.0                  # before the answer's headers
    gap: float = 0.0                    # between stream frames once the first piece of content is out
    stream_exception: str | None = None  # an exception frame right after messageStart
    cut: bool = False                   # the stream ends inside a frame


@attrs.define
class Seen:
    path: str
    raw_path: str
    headers: dict[str, str]
    body: Any
    signed: bool


class FakeBedrock:
    def __init__(self, models: tuple[str, ...] = ("anthropic.claude-3-5-haiku-20241022-v1:0",),
                 credentials: dict[str, tuple[str, str | None]] | None = None) -> None:
        self.models = models
        self.credentials = credentials if credentials is not None else {ACCESS_KEY: (SECRET_KEY, None)}
        self.script: list[Reply] = []
        self.seen: list[Seen] = []
        self.url = ""

    @property
    def last(self) -> Seen:
        return self.seen[-1]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        raw = await request_body(receive)
        pairs = [(k.decode().lower(), v.decode()) for k, v in scope["headers"]]
        headers = dict(pairs)
        raw_path = scope["raw_path"].decode()
        problem = self.authorize(scope["method"], raw_path, scope["query_string"].decode(), pairs, raw)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.seen.append(Seen(unquote(raw_path), raw_path, headers, body, problem is None))
        if problem is not None:
            await self.error(send, 403, *problem)
            return
        parts = raw_path.split("/")
        if scope["method"] != "POST" or len(parts) != 4 or parts[1] != "model" \
                or parts[3] not in ("converse", "converse-stream"):
            await self.error(send, 404, "UnknownOperationException", f"no such operation {raw_path}")
            return
        model = unquote(parts[2])
        if model not in self.models:
            await self.error(send, 404, "ResourceNotFoundException", f"Could not resolve the foundation model from "
                                                                     f"the provided model identifier: {model}")
            return
        invalid = check_request(body)
        if invalid:
            await self.error(send, 400, "ValidationException", invalid)
            return
        reply = self.script.pop(0) if self.script else Reply()
        await trio.sleep(reply.delay)
        if reply.error is not None:
            await self.error(send, reply.status, reply.error, reply.message, reply.retry_after)
        elif parts[3] == "converse":
            await self.whole(send, reply)
        else:
            await self.stream(send, reply)

    def authorize(self, method: str, raw_path: str, query: str, pairs: list[tuple[str, str]],
                  body: bytes) -> tuple[str, str] | None:
        """None when the request is signed right (or carries the API key); else (exception, message)."""
        auth = dict(pairs).get("authorization", "")
        if auth.startswith("Bearer "):
            return None if auth == f"Bearer {API_KEY}" else ("UnrecognizedClientException", "Invalid API key")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            return "MissingAuthenticationTokenException", "Missing Authentication Token"
        fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        access_key, day, region, service, _ = fields["Credential"].split("/")
        if access_key not in self.credentials:
            return "UnrecognizedClientException", "The security token included in the request is invalid."
        secret, token = self.credentials[access_key]
        names = fields["SignedHeaders"].split(";")
        if "host" not in names or "x-amz-date" not in names:
            return "InvalidSignatureException", "host and x-amz-date must be signed"
        if token is not None and dict(pairs).get("x-amz-security-token") != token:
            return "UnrecognizedClientException", "The security token included in the request is invalid."
        signed = [(k, v) for k, v in pairs if k in names]
        request = AWSRequest(method=method, url=f"http://{dict(pairs)['host']}{raw_path}" + (f"?{query}" if query
                                                                                             else ""),
                             data=body)
        for name, value in signed:   # (an email Message: a repeated name is kept, and joined by the signer)
            request.headers[name] = value
        request.context["timestamp"] = dict(pairs)["x-amz-date"]
        signer = SigV4Auth(Credentials(access_key, secret, token), service, region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if (region, service) != (REGION, "bedrock") or day != request.context["timestamp"][:8]:
            return "InvalidSignatureException", "Credential should be scoped to a valid region and service"
        if fields["Signature"] != expected:
            return "InvalidSignatureException", ("The request signature we calculated does not match the signature "
                                                 "you provided.")
        return None

    async def error(self, send: Any, status: int, kind: str, message: str, retry_after: str | None = None) -> None:
        headers = [(b"content-type", b"application/json"), (b"x-amzn-requestid", b"req-error-1"),
                   (b"x-amzn-errortype", f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/".encode())]
        if retry_after:
            headers.append((b"retry-after", retry_after.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps({"message": message}).encode()})

    async def whole(self, send: Any, reply: Reply) -> None:
        out = {"output": {"message": {"role": "assistant", "content": reply.content}}, "stopReason": reply.stop,
               "usage": reply.usage, "metrics": {"latencyMs": 12}}
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"x-amzn-requestid", b"req-fake-1")]})
        await send({"type": "http.response.body", "body": json.dumps(out).encode()})

    async def stream(self, send: Any, reply: Reply) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/vnd.amazon.eventstream"),
                                (b"x-amzn-requestid", b"req-fake-2")]})
        frames = [event("messageStart", {"role": "assistant"})]
        if reply.stream_exception:
            frames.append(exception(reply.stream_exception, reply.message))
        else:
            frames += stream_frames(reply)
        for i, data in enumerate(frames):
            if i > 1:   # messageStart and the first piece at once: a stream that stalls once under way
                await trio.sleep(reply.gap)
            if reply.cut and i == len(frames) - 1:
                data = data[:len(data) // 2]
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def stream_frames(reply: Reply) -> list[bytes]:
    """The content blocks as ConverseStream events: text in two deltas, tool input in two pieces."""
    out: list[bytes] = []
    for i, block in enumerate(reply.content):
        if "text" in block:
            half = len(block["text"]) // 2
            for piece in (block["text"][:half], block["text"][half:]):
                out.append(event("contentBlockDelta", {"contentBlockIndex": i, "delta": {"text": piece}}))
        elif "toolUse" in block:
            use = block["toolUse"]
            out.append(event("contentBlockStart", {"contentBlockIndex": i, "start": {"toolUse": {
                "toolUseId": use["toolUseId"], "name": use["name"]}}}))
            args = json.dumps(use["input"])
            for piece in (args[:3], args[3:]):
                out.append(event("contentBlockDelta", {"contentBlockIndex": i, "delta": {"toolUse": {"input": piece}}}))
        out.append(event("contentBlockStop", {"contentBlockIndex": i}))
    out.append(event("messageStop", {"stopReason": reply.stop}))
    out.append(event("metadata", {"usage": reply.usage, "metrics": {"latencyMs": 12}}))
    return out


def check_request(body: Any) -> str | None:
    """What Bedrock's validator would say of a Converse body (None: valid)."""
    if not isinstance(body, dict):
        return "Malformed input request, please reformat your input and try again."
    unknown = set(body) - REQUEST_FIELDS
    if unknown:
        return f"Malformed input request: extraneous key [{sorted(unknown)[0]}] is not permitted"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "The messages field is required and must not be empty"
    for i, msg in enumerate(messages):
        if msg.get("role") != ("user" if i % 2 == 0 else "assistant"):
            return "A conversation must start with a user message and alternate user and assistant roles"
        for block in msg.get("content") or [None]:
            if not isinstance(block, dict) or len(set(block) & BLOCK_KINDS) != 1 or set(block) - BLOCK_KINDS:
                return f"messages.{i}.content: each content block holds exactly one kind of content"
            if "text" in block and not block["text"].strip():
                return "The text field in the ContentBlock object is blank"
    unknown = set(body.get("inferenceConfig") or {}) - INFERENCE_FIELDS
    if unknown:
        return f"Malformed input request: extraneous key [{sorted(unknown)[0]}] in inferenceConfig"
    tools = body.get("toolConfig")
    uses = any("toolUse" in b or "toolResult" in b for m in messages for b in m["content"])
    if uses and not tools:
        return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
    return None


@asynccontextmanager
async def running(fake: FakeBedrock) -> AsyncIterator[FakeBedrock]:
    """``fake`` served on a free port of 127.0.0.1 until the block ends."""
    async with serving(fake) as url:
        fake.url = url
        yield fake
