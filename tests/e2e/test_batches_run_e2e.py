"""End-to-end: batches the gateway runs itself, through the official openai SDK against `switchyard serve`.

A batch goes from upload to its output file on simulated backends (a line
for a model the key may not use is an error line, the batch still
completes), and a batch whose instance is killed with SIGKILL mid-run is
picked up by the restarted instance once its lease lapses: every line is in
the output exactly once.
"""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path
from typing import Any

import openai
import trio

from tests.e2e.support import backend, gateway_config, in_thread, switchyard_serve

KEY = "sk-batch-team-000000000000000000000000"


def config(data: Path, latency: str = "5ms", lease: str = "2s") -> dict[str, Any]:
    return gateway_config(
        backend("a", latency=latency), backend("b", latency=latency),
        server={"bind_address": "127.0.0.1:8080", "data_dir": str(data), "shutdown_drain_timeout": "1s"},
        api_keys=[{"id": "team", "key": KEY, "allowed_models": ["demo"]}],
        batches={"concurrency": 4, "lease": lease, "poll_interval": "200ms"},
        usage={"flush_interval": "100ms"})


def jsonl(lines: int, model: str = "demo", bad: set[int] | None = None) -> bytes:
    rows = []
    for n in range(1, lines + 1):
        rows.append({"custom_id": f"req-{n}", "method": "POST", "url": "/v1/chat/completions",
                     "body": {"model": "other" if bad and n in bad else model,
                              "messages": [{"role": "user", "content": f"line {n}"}], "max_tokens": 8}})
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


async def wait_until(client: openai.OpenAI, batch_id: str, done: Any, seconds: float) -> Any:
    with trio.fail_after(seconds):
        while True:
            batch = await in_thread(client.batches.retrieve, batch_id)
            if done(batch):
                return batch
            await trio.sleep(0.1)


def output_lines(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    text = client.files.content(file_id).text
    return [json.loads(line) for line in text.splitlines() if line]


async def test_a_batch_runs_to_its_output_file_through_the_sdk(tmp_path: Path) -> None:
    async with switchyard_serve(tmp_path, config(tmp_path / "data")) as (_, url, _log):
        client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        uploaded = await in_thread(client.files.create, file=("in.jsonl", io.BytesIO(jsonl(20, bad={7}))),
                                   purpose="batch")
        batch = await in_thread(client.batches.create, input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                completion_window="24h", metadata={"job": "nightly"})
        assert batch.status == "validating" and batch.request_counts.total == 20
        batch = await wait_until(client, batch.id, lambda b: b.status == "completed", 30)
        assert (batch.request_counts.completed, batch.request_counts.failed) == (19, 1)
        assert batch.metadata == {"job": "nightly"}
        out = await in_thread(output_lines, client, batch.output_file_id)
        assert [o["custom_id"] for o in out] == [f"req-{n}" for n in range(1, 21) if n != 7]
        assert all(o["response"]["status_code"] == 200 and o["response"]["body"]["choices"] for o in out)
        errors = await in_thread(output_lines, client, batch.error_file_id)
        assert [e["custom_id"] for e in errors] == ["req-7"]
        assert errors[0]["response"]["status_code"] in (403, 404)


async def test_a_batch_killed_with_its_instance_resumes_after_a_restart_with_every_line_answered_once(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = config(data, latency="50ms", lease="2s")
    total = 200
    async with switchyard_serve(tmp_path, settings) as (proc, url, _log):
        client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        uploaded = await in_thread(client.files.create, file=("in.jsonl", io.BytesIO(jsonl(total))),
                                   purpose="batch")
        batch = await in_thread(client.batches.create, input_file_id=uploaded.id,
                                endpoint="/v1/chat/completions", completion_window="24h")
        part = await wait_until(client, batch.id, lambda b: b.request_counts.completed >= 40, 30)
        assert part.status == "in_progress" and part.request_counts.completed < total
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    async with switchyard_serve(tmp_path, settings) as (_, url, _log):
        client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        done = await wait_until(client, batch.id, lambda b: b.status == "completed", 60)
        assert (done.request_counts.completed, done.request_counts.failed) == (total, 0)
        out = await in_thread(output_lines, client, done.output_file_id)
        assert sorted(o["custom_id"] for o in out) == sorted(f"req-{n}" for n in range(1, total + 1))
        assert len(out) == total
