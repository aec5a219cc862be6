"""A fake provider of OpenAI's Files and Batch API for tests, on 127.0.0.1: OpenAI's routes under ``/v1``
with a Bearer key, or Azure OpenAI's v1 API under ``/openai/v1`` with an ``api-key`` header.

``POST files`` (multipart: ``purpose``, ``file``), ``POST batches``, ``GET batches/{id}``,
``POST batches/{id}/cancel``, ``GET``/``DELETE files/{id}``, ``GET files/{id}/content``, answered with the
objects the API reference documents. A batch stays ``validating`` until the test moves it (``complete``,
which writes an output line per input line, with usage, and an error file for the lines it is told
failed). Every request is kept (``seen``); ``refuse`` makes the next request answer an error as given.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import attrs

from switchyard.protocol.http.multipart import parse_form
from tests.servers import lifespan, request_body, serving

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500,
         "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
NOW = 1_700_000_000


@attrs.define
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


class FakeBatches:
    def __init__(self, key: str, *, azure: bool = False) -> None:
        self.key, self.azure = key, azure
        self.root = "/openai/v1" if azure else "/v1"
        self.url = ""
        self.seen: list[Seen] = []
        self.files: dict[str, dict[str, Any]] = {}
        self.content: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.refusals: list[tuple[int, Any]] = []

    @property
    def base(self) -> str:
        """The backend url that names this fake: its API root."""
        return self.url + self.root

    def refuse(self, status: int, body: Any) -> None:
        self.refusals.append((status, body))

    def upload(self, name: str, data: bytes, purpose: str) -> dict[str, Any]:
        file_id = f"file-up{len(self.files)}"
        self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(data), "created_at": NOW,
                               "filename": name, "purpose": purpose, "status": "processed", "expires_at": None,
                               "status_details": None}
        self.content[file_id] = data
        return self.files[file_id]

    def complete(self, batch_id: str, failed: tuple[str, ...] = ()) -> None:
        """The batch done: an output line per input line not named in ``failed``, an error line for each that is."""
        batch = self.batches[batch_id]
        out, errors = [], []
        for n, raw in enumerate(self.content[batch["input_file_id"]].splitlines()):
            line = json.loads(raw)
            if line["custom_id"] in failed:
                errors.append({"id": f"batch_req_{n}", "custom_id": line["custom_id"], "response": {
                    "status_code": 400, "request_id": f"req_{n}", "body": {"error": {"message": "bad"}}},
                    "error": None})
                continue
            out.append({"id": f"batch_req_{n}", "custom_id": line["custom_id"], "response": {
                "status_code": 200, "request_id": f"req_{n}", "body": {
                    "id": f"chatcmpl-{n}", "object": "chat.completion", "model": line["body"]["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                 "finish_reason": "stop"}], "usage": USAGE}}, "error": None})
        batch.update(status="completed", in_progress_at=NOW + 1, finalizing_at=NOW + 2, completed_at=NOW + 3,
                     request_counts={"total": len(out) + len(errors), "completed": len(out), "failed": len(errors)})
        if out:
            batch["output_file_id"] = self.upload("batch_output.jsonl", _jsonl(out), "batch_output")["id"]
        if errors:
            batch["error_file_id"] = self.upload("batch_error.jsonl", _jsonl(errors), "batch_output")["id"]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await request_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        self.seen.append(Seen(method, path, scope["query_string"].decode(), headers, body))
        given = headers.get("api-key") if self.azure else headers.get("authorization")
        if given != (self.key if self.azure else f"Bearer {self.key}"):
            await _json(send, 401, _error("Incorrect API key provided", "invalid_api_key"))
            return
        if self.refusals:
            status, payload = self.refusals.pop(0)
            await _json(send, status, payload)
            return
        if not path.startswith(self.root + "/"):
            await _json(send, 404, _error(f"no route {path}", None))
            return
        status, payload = self._route(method, path[len(self.root):].strip("/").split("/"), headers, body)
        if isinstance(payload, bytes):
            await _send(send, status, payload, b"application/octet-stream")
        else:
            await _json(send, status, payload)

    def _route(self, method: str, parts: list[str], headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        match method, parts:
            case "POST", ["files"]:
                fields, uploads = parse_form(body, headers["content-type"])
                [upload] = uploads
                return 200, self.upload(upload.filename, upload.data, str(fields["purpose"]))
            case "GET", ["files", file_id] if file_id in self.files:
                return 200, self.files[file_id]
            case "GET", ["files", file_id, "content"] if file_id in self.files:
                return 200, self.content[file_id]
            case "DELETE", ["files", file_id] if file_id in self.files:
                del self.files[file_id]
                return 200, {"id": file_id, "object": "file", "deleted": True}
            case "POST", ["batches"]:
                ask = json.loads(body)
                if ask.get("input_file_id") not in self.files:
                    return 400, _error("No such file", "invalid_file")
                batch_id = f"batch_up{len(self.batches)}"
                lines = len(self.content[ask["input_file_id"]].splitlines())
                self.batches[batch_id] = {
                    "id": batch_id, "object": "batch", "endpoint": ask["endpoint"], "errors": None,
                    "input_file_id": ask["input_file_id"], "completion_window": ask["completion_window"],
                    "status": "validating", "output_file_id": None, "error_file_id": None, "created_at": NOW,
                    "in_progress_at": None, "expires_at": NOW + 86_400, "finalizing_at": None, "completed_at": None,
                    "failed_at": None, "expired_at": None, "cancelling_at": None, "cancelled_at": None,
                    "request_counts": {"total": lines, "completed": 0, "failed": 0},
                    "metadata": ask.get("metadata")}
                return 200, self.batches[batch_id]
            case "GET", ["batches", batch_id] if batch_id in self.batches:
                return 200, self.batches[batch_id]
            case "POST", ["batches", batch_id, "cancel"] if batch_id in self.batches:
                self.batches[batch_id].update(status="cancelling", cancelling_at=NOW + 5)
                return 200, self.batches[batch_id]
        return 404, _error("No such object", None)


def _error(message: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


async def _json(send: Any, status: int, payload: Any) -> None:
    await _send(send, status, json.dumps(payload).encode(), b"application/json")


async def _send(send: Any, status: int, data: bytes, kind: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


@asynccontextmanager
async def running(fake: FakeBatches) -> AsyncIterator[FakeBatches]:
    """``fake`` served on a free port of 127.0.0.1 until the block ends."""
    async with serving(fake) as url:
        fake.url = url
        yield fake
