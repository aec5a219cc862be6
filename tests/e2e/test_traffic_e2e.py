"""GET /admin/traffic with real processes: `switchyard serve` on 127.0.0.1 with a SQLite ledger, calls made
with the openai SDK, and read back per model and per backend over the last hour."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai
import pytest
import trio

from tests.e2e.support import backend, in_thread
from tests.e2e.test_ledger_e2e import ADMIN_TOKEN, MESSAGES, ledger_config, serve


def served(name: str, model: str, **simulation: Any) -> dict[str, Any]:
    return {**backend(name, **simulation), "models": [model]}


async def traffic(admin: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await admin.get("/admin/traffic", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def totals(body: dict[str, Any]) -> dict[Any, int]:
    return {t["group"]: t["requests"] for t in body["totals"]}


async def test_calls_made_with_the_openai_sdk_show_in_traffic_by_model_and_by_backend(tmp_path):
    config = ledger_config(tmp_path, "sqlite",
                           served("quick", "demo", latency="10ms"),
                           served("slow", "deep", latency="400ms"),
                           served("bad", "broken", latency="10ms", failure={"status": 400}))
    started = time.time()
    async with serve(tmp_path, config) as (_, url, log):
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=10)

        def call(model: str, stream: bool) -> None:
            answer = client.chat.completions.create(model=model, messages=MESSAGES, stream=stream)
            if stream:
                assert "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
            else:
                assert answer.choices[0].message.content

        def refused() -> None:
            with pytest.raises(openai.BadRequestError):
                call("broken", False)

        with client:   # its connections closed before the drain, which would wait for them
            async with trio.open_nursery() as nursery:
                for i in range(4):
                    nursery.start_soon(in_thread, call, "demo", i % 2 == 1)
                for i in range(2):
                    nursery.start_soon(in_thread, call, "deep", i == 1)
                    nursery.start_soon(in_thread, refused)

        expected = {"broken": 2, "deep": 2, "demo": 4}
        async with httpx.AsyncClient(base_url=url, timeout=5,
                                     headers={"authorization": f"Bearer {ADMIN_TOKEN}"}) as admin:
            by_model: dict[str, Any] = {"totals": []}
            with trio.move_on_after(10):   # the records reach the ledger within flush_interval of each call
                while totals(by_model) != expected:
                    by_model = await traffic(admin, group_by="model")
                    await trio.sleep(0.1)
            assert totals(by_model) == expected, log.read_text()
            by_backend = await traffic(admin, group_by="backend", step=10)
            one_series = await traffic(admin)

    assert started - 3600 - 5 <= by_model["from"] <= time.time() - 3600 and by_model["to"] - by_model["from"] == 3600
    models = {t["group"]: t for t in by_model["totals"]}
    assert (models["broken"]["errors"], models["broken"]["error_rate"]) == (2, 1.0)
    assert (models["demo"]["errors"], models["deep"]["errors"]) == (0, 0)
    assert models["deep"]["latency_ms"]["p50"] > 300 > models["demo"]["latency_ms"]["p95"]
    assert models["deep"]["ttfb_ms"]["p50"] > 300 and models["demo"]["ttfb_ms"]["p50"] is not None
    for series in by_model["series"]:   # every call in one of the last hour's minutes, the empty ones there too
        assert len(series["points"]) == 61
        assert sum(p["requests"] for p in series["points"]) == expected[series["group"]]
        assert all(p["time"] % 60 == 0 for p in series["points"])
    assert totals(by_backend) == {"bad": 2, "quick": 4, "slow": 2} and by_backend["step"] == 10
    assert len(by_backend["series"][0]["points"]) == 361
    assert [t["requests"] for t in one_series["totals"]] == [8] and one_series["group_by"] is None
