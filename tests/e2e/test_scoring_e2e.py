"""End-to-end: rerank and moderations through hypercorn on 127.0.0.1.

One gateway for the module (started in a Trio loop of its own thread, with
a fake Cohere API beside it): the official openai SDK's ``moderations.create``
against simulated backends, rerank with httpx in the Cohere / Jina shape,
and what the gateway sends a generic backend pointed at Cohere and relays
of its documented answer.
"""

from __future__ import annotations

import json
import queue
import threading
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
from tests.servers import lifespan, request_body, serving

COHERE_ANSWER = {"id": "07734bd2-2473-4f07-94e1-0d9f0e6843cf",
                 "results": [{"index": 1, "relevance_score": 0.91, "document": {"text": "Paris is in France"}},
                             {"index": 0, "relevance_score": 0.02, "document": {"text": "Carson City"}}],
                 "meta": {"api_version": {"version": "1"}, "billed_units": {"search_units": 1}}}


class FakeCohere:
    """Cohere's rerank API as documented: records what it was sent, answers COHERE_ANSWER."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str], Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        body = await request_body(receive)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.seen.append((scope["path"], headers, json.loads(body) if body else None))
        if scope["method"] == "GET":   # health and model list
            payload: Any = {"object": "list", "data": []}
        else:
            payload = COHERE_ANSWER
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def config(cohere_url: str) -> dict[str, Any]:
    return {"server": {"bind_address": "127.0.0.1:8080"}, "usage": {"ledger": "memory"}, "backends": [
        {"name": "sim-a", "type": "simulated", "models": ["rr", "omni-moderation-latest"],
         "simulation": {"latency": "5ms"}},
        {"name": "cohere", "type": "generic", "url": cohere_url, "api_key": "co-secret", "discovery": False,
         "models": ["rerank-v3.5"],
         "model_configs": [{"id": "rerank-v3.5", "metadata": {"pricing": {"per_search_unit": 0.002}}}]}]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FakeCohere]]:
    """The gateway's URL and the fake Cohere behind it, for the module."""
    path: Path = tmp_path_factory.mktemp("scoring") / "switchyard.yaml"
    cohere = FakeCohere()
    started: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    async def hold() -> None:
        client_eof.install()
        async with serving(cohere) as cohere_url:
            path.write_text(yaml.safe_dump(config(cohere_url)), encoding="utf-8")
            hc = hypercorn_config(load_file(str(path)).snapshot.server, "127.0.0.1:0")
            hc.graceful_timeout = 1.0
            done = trio.Event()
            async with trio.open_nursery() as nursery:
                binds = await nursery.start(lambda task_status: serve(create_app(str(path)), hc,
                                                                      shutdown_trigger=done.wait,
                                                                      task_status=task_status))
                started.put(binds[0])
                await trio.to_thread.run_sync(stop.wait, abandon_on_cancel=True)
                done.set()

    def run() -> None:
        try:
            trio.run(hold)
        except BaseException as exc:   # reported to the fixture's thread
            started.put(exc)

    thread = threading.Thread(target=run, name="scoring-e2e", daemon=True)
    thread.start()
    try:
        got = started.get(timeout=30)
        if isinstance(got, BaseException):
            raise got
        yield got, cohere
    finally:
        stop.set()
        thread.join(timeout=10)


def test_the_openai_sdk_moderates_through_the_gateway(served):
    url, _ = served
    with openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=10) as client:
        result = client.moderations.create(input=["they plan to bomb the bridge", "a quiet afternoon"])
    assert [r.flagged for r in result.results] == [True, False]
    assert result.results[0].categories.violence is True and result.model == "omni-moderation-latest"


def test_rerank_in_the_cohere_jina_shape_answers_best_first(served):
    url, _ = served
    reply = httpx.post(url + "/v1/rerank", json={"model": "rr", "query": "capital of france", "top_n": 1,
                                                 "documents": ["Carson City", {"text": "the capital of France"}]})
    assert reply.status_code == 200
    assert reply.json()["results"] == [{"index": 1, "relevance_score": 1.0,
                                        "document": {"text": "the capital of France"}}]


def test_a_rerank_bad_input_is_a_400_in_openais_shape(served):
    url, _ = served
    reply = httpx.post(url + "/rerank", json={"model": "rr", "query": "q", "documents": ["a"], "top_n": -1})
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "top_n" and reply.json()["error"]["type"] == "invalid_request_error"


def test_a_generic_backend_at_cohere_gets_its_documented_request_and_its_answer_is_relayed_and_priced(served):
    url, cohere = served
    sent = {"model": "rerank-v3.5", "query": "capital of france", "documents": ["Carson City", "Paris is in France"],
            "top_n": 2, "return_documents": True, "max_chunks_per_doc": 10}
    reply = httpx.post(url + "/v1/rerank", json=sent)
    assert reply.status_code == 200 and reply.json() == COHERE_ANSWER
    assert reply.headers["x-continuum-cost"] == "0.002"   # one search unit, as Cohere billed it
    [(path, headers, body)] = [seen for seen in cohere.seen if seen[0].endswith("/rerank")]
    assert (path, headers["authorization"], body) == ("/v1/rerank", "Bearer co-secret", sent)
