"""End-to-end: ``tracing.otlp`` spans reach a real OTLP/HTTP receiver, and a dead collector costs a call nothing.

The receiver is hypercorn on ``127.0.0.1`` taking ``POST /v1/traces`` and
decoding each body with opentelemetry-proto; the gateway is a real one on a
real socket (the ``start_gateway`` fixture) in front of simulated backends,
whose recorded requests show the ``traceparent`` each attempt sent.
"""

from __future__ import annotations

import functools
import re
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.e2e.support import backend, free_port, gateway_config
from tests.servers import lifespan, request_body

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
CLIENT_TRACE, CLIENT_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
TOKEN = "collector-token-0123"
PROMPT = "the-private-prompt-text-4711"


class Collector:
    """What the receiver was sent: each export's headers and decoded spans."""

    def __init__(self) -> None:
        self.exports: list[tuple[dict[str, str], ExportTraceServiceRequest]] = []
        self.raw: list[bytes] = []
        self.url = ""

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await request_body(receive)
        if scope["method"] == "POST" and scope["path"] == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            self.raw.append(body)
            self.exports.append(({k.decode(): v.decode() for k, v in scope["headers"]}, request))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/x-protobuf")]})
        await send({"type": "http.response.body", "body": ExportTraceServiceResponse().SerializeToString()})

    def spans(self) -> list[Any]:
        return [span for _, req in self.exports for rs in req.resource_spans for ss in rs.scope_spans
                for span in ss.spans]

    async def wait_for(self, count: int) -> list[Any]:
        with trio.fail_after(10):
            while len(self.spans()) < count:
                await trio.sleep(0.02)
        return self.spans()


@asynccontextmanager
async def collector() -> AsyncIterator[Collector]:
    c = Collector()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = 0.5
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve, c.app, config, shutdown_trigger=stop.wait))
        c.url = binds[0]
        yield c
        stop.set()


def otlp(endpoint: str, **extra: Any) -> dict[str, Any]:
    return {"otlp": {"endpoint": endpoint, "export_interval": "50ms", "timeout": "2s",
                     "headers": {"Authorization": f"Bearer {TOKEN}"}, "service_name": "gw-under-test",
                     "resource_attributes": {"deployment.environment": "test"}, **extra}}


def attributes(span: Any) -> dict[str, Any]:
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = getattr(v, v.WhichOneof("value"))
    return out


RETRY_AND_FALLBACK = dict(
    retry={"max_attempts": 2, "initial_delay": "50ms", "jitter": False},
    fallback={"enabled": True, "fallback_chains": {"demo": ["small"]}},
    health_checks={"interval": "1h"},
)


async def test_a_call_with_a_retry_and_a_fallback_hop_exports_one_tree_whose_ids_the_backends_saw(start_gateway):
    a = backend("a", failure={"status": 503})
    b = {**backend("b"), "models": ["small"]}
    async with collector() as c:
        gw = await start_gateway(gateway_config(a, b, tracing={"headers": {"client_ref": "X-Client-Ref"},
                                                                **otlp(c.url)}, **RETRY_AND_FALLBACK))
        async with httpx.AsyncClient(timeout=10) as http:
            reply = await http.post(gw.v1 + "/chat/completions", json={
                "model": "demo", "messages": [{"role": "user", "content": PROMPT}]}, headers={
                "traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01", "x-client-ref": "billing-7"})
        assert reply.status_code == 200
        sent = [*gw.sim("a").requests, *gw.sim("b").requests]
        parents = [TRACEPARENT.fullmatch(r.headers["traceparent"]).groups() for r in sent]
        assert len(sent) == 3 and {p[0] for p in parents} == {CLIENT_TRACE}   # a, a again, then b

        spans = await c.wait_for(4)
        assert len(spans) == 4
        root = next(s for s in spans if s.name == "router.request")
        attempts = sorted((s for s in spans if s is not root), key=lambda s: s.start_time_unix_nano)
        # one tree: the root continues the client's span; each attempt's id is the one its backend saw
        assert {s.trace_id.hex() for s in spans} == {CLIENT_TRACE}
        assert root.parent_span_id.hex() == CLIENT_SPAN
        assert [s.span_id.hex() for s in attempts] == [p[1] for p in parents]
        assert all(s.parent_span_id == root.span_id for s in attempts)
        assert [attributes(s)["router.backend"] for s in attempts] == ["a", "a", "b"]
        assert [s.name for s in attempts] == ["chat demo", "chat demo", "chat small"]
        assert attributes(attempts[0])["error.type"] == "503"
        assert attributes(attempts[2])["gen_ai.response.model"] == "small"

        root_attrs = attributes(root)
        request_id = reply.headers["x-continuum-request-id"]
        assert root_attrs["router.request_id"] == request_id and root_attrs["router.client_ref"] == "billing-7"
        assert root_attrs["gen_ai.request.model"] == "demo" and root_attrs["gen_ai.response.model"] == "small"
        assert root_attrs["gen_ai.usage.output_tokens"] > 0 and root_attrs["router.attempts"] == 3
        assert root_attrs["http.response.status_code"] == 200
        assert [e.name for e in root.events] == ["router.retry", "router.fallback"]
        assert root.start_time_unix_nano <= attempts[0].start_time_unix_nano
        assert attempts[-1].end_time_unix_nano <= root.end_time_unix_nano

        headers, request = c.exports[0]
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert headers["content-type"] == "application/x-protobuf"
        resource = {kv.key: kv.value.string_value for kv in request.resource_spans[0].resource.attributes}
        assert resource["service.name"] == "gw-under-test" and resource["deployment.environment"] == "test"
        assert all(PROMPT.encode() not in raw for raw in c.raw)   # never the prompt


async def test_an_unreachable_collector_never_slows_or_fails_a_call_and_its_drops_are_counted(start_gateway):
    dead = f"http://127.0.0.1:{free_port()}"   # nothing listens there
    gw = await start_gateway(gateway_config(backend("a"), tracing=otlp(dead, max_queue_size=2)))
    async with httpx.AsyncClient(timeout=10) as http:
        started = trio.current_time()
        for _ in range(5):
            reply = await http.post(gw.v1 + "/chat/completions", json={
                "model": "demo", "messages": [{"role": "user", "content": "hi"}]})
            assert reply.status_code == 200
        assert trio.current_time() - started < 2.0   # five 10 ms calls, no export waited for
        metrics = (await http.get(gw.url + "/metrics")).text
    spans = gw.app.runtime.spans
    assert spans.queued + spans.dropped == 10 and spans.dropped >= 1   # two spans a call, a queue of two
    assert f"otlp_spans_dropped_total {float(spans.dropped)}" in metrics


async def test_sampling_follows_the_client_flag_and_the_ratio(start_gateway):
    async with collector() as c:
        gw = await start_gateway(gateway_config(backend("a"), tracing=otlp(c.url, sampling_ratio=0.0)))
        async with httpx.AsyncClient(timeout=10) as http:
            for flags in ("01", "00", None):
                headers = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-{flags}"} if flags else {}
                assert (await http.post(gw.v1 + "/chat/completions", headers=headers, json={
                    "model": "demo", "messages": [{"role": "user", "content": "hi"}]})).status_code == 200
        spans = await c.wait_for(2)
        await trio.sleep(0.2)   # anything else would have been exported by now
        assert len(c.spans()) == 2   # the sampled parent's call only: ratio 0 keeps no new trace
        assert {s.trace_id.hex() for s in spans} == {CLIENT_TRACE}
        assert gw.app.runtime.spans.unsampled == 2
