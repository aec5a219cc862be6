"""End-to-end: the Files and Batch APIs through hypercorn on 127.0.0.1, the official openai SDK as the client.

One gateway for the module (its Trio loop in a thread of its own, its
SQLite store and files directory in a temporary folder), with two keys:
files and batches are their owner's alone. A batch the gateway runs stays
``validating`` here: what moves it on is the runner's (its own tests).
"""

from __future__ import annotations

import io
import json
import queue
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

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
from tests.e2e.support import backend, gateway_config

KEY_A, KEY_B = "sk-e2e-files-a-0123456789abcdef", "sk-e2e-files-b-0123456789abcdef"
MAX_FILE = 64 * 1024      # the module's batches.max_file_bytes
INLINE = 256              # ... and batches.inline_bytes: larger files go to the directory


def config(data_dir: Path) -> dict[str, Any]:
    return gateway_config(
        backend("sim"),
        server={"bind_address": "127.0.0.1:8080", "data_dir": str(data_dir)},
        api_keys=[{"id": "team-a", "key": KEY_A}, {"id": "team-b", "key": KEY_B}],
        batches={"max_file_bytes": MAX_FILE, "inline_bytes": INLINE, "max_lines": 50})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The gateway's URL and its data directory, for the module."""
    folder = tmp_path_factory.mktemp("files")
    path = folder / "switchyard.yaml"
    path.write_text(yaml.safe_dump(config(folder / "data")), encoding="utf-8")
    started: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    async def hold() -> None:
        client_eof.install()
        hc = hypercorn_config(load_file(str(path)).snapshot.server, "127.0.0.1:0")
        hc.graceful_timeout = 1.0
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(lambda task_status: serve(create_app(str(path)), hc,
                                                                  shutdown_trigger=done.wait, task_status=task_status))
            started.put(binds[0])
            await trio.to_thread.run_sync(stop.wait, abandon_on_cancel=True)
            done.set()

    def run() -> None:
        try:
            trio.run(hold)
        except BaseException as exc:   # reported to the fixture's thread
            started.put(exc)

    thread = threading.Thread(target=run, name="files-e2e", daemon=True)
    thread.start()
    try:
        got = started.get(timeout=30)
        if isinstance(got, BaseException):
            raise got
        yield got, folder / "data"
    finally:
        stop.set()
        thread.join(timeout=10)


def sdk(served: tuple[str, Path], key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=served[0] + "/v1", api_key=key, max_retries=0, timeout=10)


def jsonl(*lines: Any) -> bytes:
    return b"".join((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines)


def chat_line(custom_id: str, model: str = "demo", **body: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": model, "messages": [{"role": "user", "content": "hi"}], **body}}


INPUT = jsonl(chat_line("req-1"), chat_line("req-2"), chat_line("req-3"))


def test_a_file_is_uploaded_listed_read_and_deleted(served):
    big = jsonl(*(chat_line(f"big-{i}", padding="x" * 100) for i in range(20)))   # past inline_bytes: on disk
    with sdk(served) as client:
        small = client.files.create(file=("requests.jsonl", io.BytesIO(INPUT)), purpose="batch")
        large = client.files.create(file=("large.jsonl", io.BytesIO(big)), purpose="batch")
        assert (small.object, small.purpose, small.filename, small.bytes, small.status) == \
            ("file", "batch", "requests.jsonl", len(INPUT), "processed")
        assert small.id.startswith("file-") and len(small.id) == len("file-") + 24
        assert client.files.retrieve(small.id) == small
        assert client.files.content(small.id).content == INPUT
        assert client.files.content(large.id).content == big
        assert (served[1] / "files" / large.id).read_bytes() == big
        listed = [f.id for f in client.files.list(purpose="batch")]
        assert listed.index(large.id) < listed.index(small.id)   # newest first
        deleted = client.files.delete(large.id)
        assert (deleted.id, deleted.deleted, deleted.object) == (large.id, True, "file")
        assert not (served[1] / "files" / large.id).exists()
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(large.id)


def test_the_sdk_pages_through_files_and_batches(served):
    with sdk(served) as client:
        made = [client.files.create(file=(f"p{i}.jsonl", io.BytesIO(INPUT)), purpose="batch").id for i in range(3)]
        pages = client.files.list(limit=1, order="asc")
        assert len(pages.data) == 1 and pages.has_more
        every = [f.id for f in client.files.list(limit=1, order="asc")]   # the SDK follows after=last_id
        assert every[-3:] == made
        batches = [client.batches.create(input_file_id=made[0], endpoint="/v1/chat/completions",
                                         completion_window="24h").id for _ in range(2)]
        assert [b.id for b in client.batches.list(limit=1)][:2] == batches[::-1]


def test_a_batch_is_created_retrieved_listed_and_cancelled(served):
    with sdk(served) as client:
        file = client.files.create(file=("requests.jsonl", io.BytesIO(INPUT)), purpose="batch")
        batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                      completion_window="24h", metadata={"job": "nightly"})
        assert batch.id.startswith("batch_") and batch.status == "validating"
        assert (batch.input_file_id, batch.endpoint, batch.completion_window, batch.model) == \
            (file.id, "/v1/chat/completions", "24h", "demo")
        assert batch.request_counts.total == 3 and batch.request_counts.completed == 0
        assert batch.expires_at == batch.created_at + 86_400 and batch.metadata == {"job": "nightly"}
        again = client.batches.retrieve(batch.id)   # a runner may have claimed it meanwhile: in_progress
        assert again.model_dump(exclude={"status", "in_progress_at"}) == \
            batch.model_dump(exclude={"status", "in_progress_at"})
        assert batch.id in [b.id for b in client.batches.list()]
        cancelled = client.batches.cancel(batch.id)   # cancelled at once if no runner had started it yet
        assert cancelled.status in ("cancelling", "cancelled") and cancelled.cancelling_at is not None
        client.files.delete(file.id)   # the batch keeps its own copy of the lines
        deadline = time.monotonic() + 10
        while (ended := client.batches.retrieve(batch.id)).status != "cancelled" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ended.status == "cancelled" and ended.cancelled_at is not None
        assert ended.request_counts.total == 3


def test_another_keys_files_and_batches_are_not_found_nor_listed(served):
    with sdk(served) as a, sdk(served, KEY_B) as b:
        file = a.files.create(file=("requests.jsonl", io.BytesIO(INPUT)), purpose="batch")
        batch = a.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
        for call in (lambda: b.files.retrieve(file.id), lambda: b.files.content(file.id),
                     lambda: b.files.delete(file.id), lambda: b.batches.retrieve(batch.id),
                     lambda: b.batches.cancel(batch.id),
                     lambda: b.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                              completion_window="24h")):
            with pytest.raises(openai.NotFoundError):
                call()
        assert file.id not in [f.id for f in b.files.list()]
        assert batch.id not in [x.id for x in b.batches.list()]
        unknown = httpx.get(served[0] + "/v1/files/file-000000000000000000000000",
                            headers={"authorization": f"Bearer {KEY_B}"}).json()
        theirs = httpx.get(served[0] + f"/v1/files/{file.id}", headers={"authorization": f"Bearer {KEY_B}"}).json()
        assert theirs["error"] == {**unknown["error"], "message": unknown["error"]["message"].replace(
            "file-000000000000000000000000", file.id)}
        assert a.batches.retrieve(batch.id).status == "validating"   # b's cancel changed nothing


def test_a_bad_line_is_named_by_line_and_field(served):
    bad = jsonl(chat_line("req-1"), {"custom_id": "req-2", "method": "POST", "url": "/v1/chat/completions",
                                     "body": {"messages": []}})
    with sdk(served) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            client.files.create(file=("bad.jsonl", io.BytesIO(bad)), purpose="batch")
        assert caught.value.body["param"] == "line 2: body.model"
        assert caught.value.body["message"] == "line 2: body.model: is required"
        with pytest.raises(openai.BadRequestError) as caught:
            client.files.create(file=("bad.jsonl", io.BytesIO(INPUT + b"not json\n")), purpose="batch")
        assert caught.value.body["param"] == "line 4" and caught.value.body["code"] == "invalid_json_line"


def test_a_purpose_other_than_batch_is_refused_naming_it(served):
    with sdk(served) as client, pytest.raises(openai.BadRequestError) as caught:
        client.files.create(file=("a.jsonl", io.BytesIO(INPUT)), purpose="assistants")
    assert caught.value.body["param"] == "purpose" and '"batch"' in caught.value.body["message"]


def test_an_upload_past_max_file_bytes_is_a_413(served):
    with sdk(served) as client, pytest.raises(openai.APIStatusError) as caught:
        client.files.create(file=("big.jsonl", io.BytesIO(b"x" * (MAX_FILE + 1))), purpose="batch")
    assert caught.value.status_code == 413 and "batches.max_file_bytes" in caught.value.body["message"]


def test_an_upload_past_the_bound_is_refused_before_it_is_read_whole(served):
    """Content-Length past the bound: the 413 comes back while almost all of the body is still unsent."""
    host, port = served[0].removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(f"POST /v1/files HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {KEY_A}\r\n"
                     f"content-type: multipart/form-data; boundary=b\r\ncontent-length: {50 * MAX_FILE}\r\n\r\n"
                     f"--b\r\n".encode())
        answer = b""
        while chunk := conn.recv(65536):   # the answer, then the server closes the connection
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert b"batches.max_file_bytes" in answer


def test_a_chunked_upload_is_refused_once_the_bytes_read_pass_the_bound(served):
    """No Content-Length: the 413 comes once the bound (and the form's slack) has come, the rest never sent."""
    host, port = served[0].removeprefix("http://").split(":")
    piece = b"x" * 32 * 1024
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(f"POST /v1/files HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {KEY_A}\r\n"
                     f"content-type: multipart/form-data; boundary=b\r\ntransfer-encoding: chunked\r\n\r\n".encode())
        for _ in range(5):   # 160 KiB of the body, past 64 KiB and the form's 64; no last chunk
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert b"batches.max_file_bytes" in answer


def test_a_batch_refuses_an_endpoint_its_lines_do_not_call(served):
    with sdk(served) as client:
        file = client.files.create(file=("requests.jsonl", io.BytesIO(INPUT)), purpose="batch")
        with pytest.raises(openai.BadRequestError) as caught:
            client.batches.create(input_file_id=file.id, endpoint="/v1/embeddings", completion_window="24h")
    assert caught.value.body["param"] == "endpoint"


def test_a_batch_of_an_unknown_file_is_not_found(served):
    with sdk(served) as client, pytest.raises(openai.NotFoundError) as caught:
        client.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h")
    assert caught.value.body["param"] == "input_file_id"


def test_a_completion_window_other_than_24h_is_refused(served):
    with sdk(served) as client:
        file = client.files.create(file=("requests.jsonl", io.BytesIO(INPUT)), purpose="batch")
        with pytest.raises(openai.BadRequestError) as caught:
            client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                  completion_window="48h")   # type: ignore[arg-type]
    assert caught.value.body["param"] == "completion_window"


@pytest.mark.parametrize("call, param", [
    (lambda c: c.files.list(limit=0), "limit"),
    (lambda c: c.files.list(limit=10_001), "limit"),
    (lambda c: c.files.list(order="sideways"), "order"),
    (lambda c: c.batches.list(limit=101), "limit"),
    (lambda c: c.batches.list(after="batch_1 OR 1=1"), "after"),
    (lambda c: c.batches.list(extra_query={"colour": "red"}), "colour"),
])
def test_a_list_parameter_out_of_range_is_a_400_naming_it(served, call, param):
    with sdk(served) as client, pytest.raises(openai.BadRequestError) as caught:
        list(call(client))
    assert caught.value.body["param"] == param


def test_the_routes_are_counted_by_template_not_by_id(served):
    with sdk(served) as client:
        file = client.files.create(file=("requests.jsonl", io.BytesIO(INPUT)), purpose="batch")
        client.files.retrieve(file.id)
        client.files.content(file.id)
    metrics = httpx.get(served[0] + "/metrics").text
    assert 'switchyard_http_requests_total{method="GET",route="/v1/files/{file_id}",status="200"}' in metrics
    assert 'switchyard_http_requests_total{method="GET",route="/v1/files/{file_id}/content",status="200"}' in metrics
    assert file.id not in metrics
