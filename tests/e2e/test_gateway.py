"""End-to-end: Switchyard on a real socket, the official openai SDK as the client.

One test per rule, named after it. Backends are simulated (in-process) but
everything between the client and them is real: TCP, HTTP/1.1, hypercorn,
the ASGI app, the actors and the shared httpx client.
"""

from __future__ import annotations

import json
import signal

import httpx
import openai
import pytest
import trio

from tests.e2e.support import Gateway, backend, gateway_config, in_thread, switchyard_serve

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CHAT = {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


def five_tokens(name: str) -> str:
    return f"Hello from {name}. The quick brown fox"


async def wait_until(predicate, *, within: float, step: float = 0.02) -> bool:
    with trio.move_on_after(within):
        while not predicate():
            await trio.sleep(step)
        return True
    return False


# --- chat completions through the SDK -----------------------------------------

async def test_buffered_chat_completion_returns_backend_content_and_usage(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client:
        completion = await in_thread(client.chat.completions.create, **CHAT)
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == five_tokens("sim-a")
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 5
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + 5


async def test_streaming_chunks_concatenate_to_the_content_and_end_cleanly(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))

    def consume(client: openai.OpenAI):
        chunks = list(client.chat.completions.create(**CHAT, stream=True,
                                                     stream_options={"include_usage": True}))
        return chunks

    with sdk(gw) as client:
        chunks = await in_thread(consume, client)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == five_tokens("sim-a")
    assert len(chunks) == 7  # five content chunks, the closing one, and the usage chunk the client asked for
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    assert gw.sim("sim-a").count("completed") == 1


async def test_metrics_and_server_timing_tell_of_a_call_served_over_a_real_socket(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client:
        raw = await in_thread(client.chat.completions.with_raw_response.create, **CHAT)
    assert raw.parse().choices[0].message.content == five_tokens("sim-a")
    timing = dict(item.strip().split(";dur=") for item in raw.headers["server-timing"].split(","))
    assert set(timing) == {"gateway", "upstream", "total"}
    gateway_ms, upstream_ms, total_ms = (float(timing[k]) for k in ("gateway", "upstream", "total"))
    assert gateway_ms > 0 and upstream_ms > 0 and gateway_ms + upstream_ms == pytest.approx(total_ms, abs=0.002)
    labels = {"route": "/v1/chat/completions", "model": "demo", "backend": "sim-a"}
    registry = gw.app.runtime.metrics.registry
    # the call's trace is stored just after its last byte: the client may see [DONE] first
    assert await wait_until(lambda: registry.get_sample_value(
        "switchyard_requests_total", {**labels, "status": "200"}) == 1, within=2.0)
    async with httpx.AsyncClient(base_url=gw.url, timeout=5) as http:
        scraped = (await http.get("/metrics")).text
    assert 'switchyard_time_to_first_token_seconds_count{backend="sim-a",model="demo",' \
           'route="/v1/chat/completions"} 1.0' in scraped
    assert 'switchyard_http_requests_total{method="POST",route="/v1/chat/completions",status="200"} 1.0' in scraped
    assert 'switchyard_gateway_overhead_seconds_count{route="/v1/chat/completions"} 1.0' in scraped


async def test_round_robin_alternates_between_two_backends(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a"), backend("sim-b")))

    def four(client: openai.OpenAI) -> list[str]:
        return [client.chat.completions.create(**CHAT).choices[0].message.content for _ in range(4)]

    with sdk(gw) as client:
        contents = await in_thread(four, client)
    names = [c.split(".")[0].removeprefix("Hello from ") for c in contents]
    assert set(names) == {"sim-a", "sim-b"}
    assert all(a != b for a, b in zip(names, names[1:], strict=False)), names
    assert gw.sim("sim-a").count("request") == gw.sim("sim-b").count("request") == 2


async def test_models_list_shows_the_configured_model(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a"), backend("sim-b")))
    with sdk(gw) as client:
        page = await in_thread(client.models.list)
    assert [m.id for m in page.data] == ["demo"]


# --- client errors -----------------------------------------------------------

async def test_unknown_model_is_not_found_with_code_model_not_found(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    with sdk(gw) as client:
        with pytest.raises(openai.NotFoundError) as info:
            await in_thread(client.chat.completions.create, model="no-such-model",
                            messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 404
    assert info.value.code == "model_not_found"
    assert info.value.param == "model"
    assert gw.sim("sim-a").count("request") == 0


async def test_malformed_body_is_400_naming_the_param_path(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))
    body = {"model": "demo", "messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]}
    async with httpx.AsyncClient(base_url=gw.url, timeout=5) as http:
        bad_role = await http.post("/v1/chat/completions", json=body)
        not_json = await http.post("/v1/chat/completions", content=b"{not json",
                                   headers={"content-type": "application/json"})
    assert bad_role.status_code == 400
    error = bad_role.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "messages[1].role"
    assert not_json.status_code == 400
    assert not_json.json()["error"]["code"] == "invalid_json"
    assert gw.sim("sim-a").count("request") == 0


async def test_body_over_max_body_bytes_is_413(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a")))  # max_body_bytes: 4096
    big = json.dumps({**CHAT, "messages": [{"role": "user", "content": "x" * 8192}]}).encode()

    async def chunked():  # no content-length: the limit must hold while reading
        for i in range(0, len(big), 1024):
            yield big[i:i + 1024]

    async with httpx.AsyncClient(base_url=gw.url, timeout=5) as http:
        declared = await http.post("/v1/chat/completions", content=big,
                                   headers={"content-type": "application/json"})
        streamed = await http.post("/v1/chat/completions", content=chunked(),
                                   headers={"content-type": "application/json"})
    for response in (declared, streamed):
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "request_too_large"
    assert gw.sim("sim-a").count("request") == 0


# --- upstream failures ---------------------------------------------------------

async def test_upstream_error_status_is_passed_through(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-limited", failure={"status": 429})))
    with sdk(gw) as client:
        with pytest.raises(openai.RateLimitError) as info:
            await in_thread(client.chat.completions.create, **CHAT)
    assert info.value.status_code == 429
    assert info.value.body["message"] == "simulated failure from sim-limited"
    assert info.value.code == "simulated_429"


async def test_mid_stream_reset_raises_api_error_after_first_chunks(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a", failure={"reset_after_chunk": 2})))

    def consume(client: openai.OpenAI):
        seen: list[str] = []
        try:
            for chunk in client.chat.completions.create(**CHAT, stream=True):
                seen.append(chunk.choices[0].delta.content or "")
        except openai.APIError as exc:
            return seen, exc
        return seen, None

    with sdk(gw) as client:
        seen, error = await in_thread(consume, client)
    assert seen == ["Hello from sim-a.", " The"]
    assert isinstance(error, openai.APIError), "the stream ended without an error"
    assert not isinstance(error, openai.APIStatusError)  # the status line was already 200
    assert "sim-a" in error.message
    assert error.body["code"] == "upstream_connection_error"


async def test_mid_stream_reset_sends_no_done_event(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a", failure={"reset_after_chunk": 2})))
    async with httpx.AsyncClient(base_url=gw.url, timeout=5) as http:
        response = await http.post("/v1/chat/completions", json={**CHAT, "stream": True})
    assert response.status_code == 200
    events = [e for e in response.text.split("\n\n") if e]
    assert len(events) == 3
    assert json.loads(events[-1].removeprefix("data: "))["error"]["code"] == "upstream_connection_error"
    assert "[DONE]" not in response.text


# --- health and readiness -----------------------------------------------------------

async def test_health_and_ready_are_200_with_healthy_backends(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-a"), backend("sim-b")))
    async with httpx.AsyncClient(base_url=gw.url, timeout=5) as http:
        health = await http.get("/health")
        ready = await http.get("/ready")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    assert ready.json()["healthy_backends"] == 2


async def test_ready_is_503_when_the_only_backend_fails_health_checks(start_gateway):
    gw = await start_gateway(gateway_config(
        backend("sim-sick", health_status=500),
        health_checks={"unhealthy_threshold": 1, "warmup_check_interval": "100ms"}))
    async with httpx.AsyncClient(base_url=gw.url, timeout=5) as http:
        status = 0
        with trio.move_on_after(2):
            while status != 503:
                ready = await http.get("/ready")
                status = ready.status_code
                if status != 503:
                    await trio.sleep(0.05)
        assert status == 503, ready.text
        assert ready.json() == {"status": "unavailable", "healthy_backends": 0, "routable_backends": 0,
                                "backends": {"sim-sick": "unhealthy"}}
        assert (await http.get("/health")).status_code == 200  # liveness is not readiness
        refused = await http.post("/v1/chat/completions", json=CHAT)
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "no_healthy_backends"


# --- cancellation -----------------------------------------------------------------------

async def test_client_disconnect_cancels_the_upstream(start_gateway):
    gw = await start_gateway(gateway_config(backend("sim-slow", tokens_per_second=5, chunks=50)))
    sim = gw.sim("sim-slow")
    async with httpx.AsyncClient(base_url=gw.url, timeout=5) as http:
        async with http.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as response:
            assert response.status_code == 200
            async for chunk in response.aiter_raw():
                assert b"Hello from sim-slow." in chunk
                break
        # leaving the block unread closes the connection: the client is gone
    assert await wait_until(lambda: sim.count("cancelled") == 1, within=1.0), sim.events
    assert sim.count("completed") == 0
    assert gw.app.runtime.pool.in_flight["sim-slow"] == 0


# --- the CLI -------------------------------------------------------------------------------

async def test_switchyard_serve_cli_serves_chat(tmp_path):
    async with switchyard_serve(tmp_path, gateway_config(backend("sim-cli"))) as (_, url, _):
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            response = await http.post("/v1/chat/completions", json=CHAT)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == five_tokens("sim-cli")


async def test_switchyard_serve_cli_drains_in_flight_stream_on_sigterm(tmp_path):
    config = gateway_config(backend("sim-cli", tokens_per_second=20, chunks=10))  # about 0.5 s of stream
    async with switchyard_serve(tmp_path, config) as (proc, url, log_path):
        body = b""
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            async with http.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as response:
                async for chunk in response.aiter_raw():
                    if not body:
                        proc.send_signal(signal.SIGTERM)
                    body += chunk
        assert body.endswith(b"data: [DONE]\n\n")
        with trio.move_on_after(5):
            await proc.wait()
        assert proc.returncode == 0, log_path.read_text()


@pytest.mark.parametrize("workers", [1, 2])
async def test_drain_finishes_the_stream_refuses_new_connections_and_says_not_ready(tmp_path, workers):
    config = gateway_config(backend("sim-cli", tokens_per_second=10, chunks=10))  # about 1 s of stream
    config["server"] = {**config.get("server", {}), "shutdown_drain_timeout": "5s"}
    async with switchyard_serve(tmp_path, config, workers=workers) as (proc, url, log_path):
        body = b""
        async with httpx.AsyncClient(base_url=url, timeout=5) as keep, \
                httpx.AsyncClient(base_url=url, timeout=5) as http:
            assert (await keep.get("/ready")).status_code == 200  # a kept-alive connection, like a balancer's
            async with http.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as response:
                async for chunk in response.aiter_raw():
                    if not body:
                        proc.send_signal(signal.SIGTERM)
                        ready: object = 200
                        with trio.move_on_after(1):  # the signal reaches each worker within moments
                            while ready == 200:
                                await trio.sleep(0.1)
                                try:
                                    ready = (await keep.get("/ready")).status_code
                                except httpx.TransportError:
                                    ready = "closed"
                        assert ready in (503, "closed"), log_path.read_text()  # not ready once draining
                        with pytest.raises(httpx.ConnectError):
                            async with httpx.AsyncClient(timeout=2) as fresh:
                                await fresh.get(url + "/health")
                    body += chunk
        assert body.endswith(b"data: [DONE]\n\n")
        with trio.move_on_after(8):
            await proc.wait()
        assert proc.returncode == 0, log_path.read_text()
