"""GET /v1/models, /v1/models/extended and /v1/models/{model} through the app (MockClock)."""

from pathlib import Path

import pytest
import trio

from tests.harness import gateway, request

METADATA = """
models:
  - id: gpt-5.6-sol
    aliases: [gpt-5.6]
    metadata:
      display_name: GPT-5.6 Sol
      capabilities: [chat, tool]
      pricing: {input_tokens: 5.0, output_tokens: 30.0, image_input_tokens: 8.0}
      limits: {context_window: 1050000, max_output: 128000}
  - id: qwen3.6-35b-a3b
    metadata: {display_name: Qwen3.6 35B A3B}
"""

CONFIG = """
model_metadata_file: {metadata}
health_checks: {{interval: 1h}}
backends:
  - {{name: a, type: simulated, models: [gpt-5.6-sol, unsloth/Qwen3.6-35B-A3B-GGUF, plain]}}
  - {{name: b, type: simulated, models: [custom/gpt-5.6-sol], simulation: {{health_status: 500}}}}
  - {{name: hidden, type: simulated, models: [secret], internal: true}}
"""


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "model-metadata.yaml"
    path.write_text(METADATA, encoding="utf-8")
    return CONFIG.format(metadata=path)


def data(reply) -> dict:
    return {m["id"]: m for m in reply.json()["data"]}


async def test_models_rows_carry_spec_metadata(autojump_clock, config):
    async with gateway(config) as app:
        reply = await request(app, "GET", "/v1/models")
        assert reply.status == 200
        rows = data(reply)
        assert list(rows) == ["custom/gpt-5.6-sol", "gpt-5.6-sol", "plain", "unsloth/Qwen3.6-35B-A3B-GGUF"]
        sol = rows["gpt-5.6-sol"]
        assert {k: sol[k] for k in ("object", "created", "owned_by", "backends")} == {
            "object": "model", "created": 0, "owned_by": "a", "backends": ["a"]}
        assert sol["metadata"] == {"display_name": "GPT-5.6 Sol", "capabilities": ["chat", "tool"],
                                   "pricing": {"input_tokens": 5.0, "output_tokens": 30.0},
                                   "limits": {"context_window": 1050000, "max_output": 128000}}
        assert rows["custom/gpt-5.6-sol"]["metadata"] == sol["metadata"]
        assert rows["unsloth/Qwen3.6-35B-A3B-GGUF"]["metadata"] == {"display_name": "Qwen3.6 35B A3B"}
        assert "metadata" not in rows["plain"]


async def test_extended_lists_full_metadata_resolution_and_health(autojump_clock, config):
    async with gateway(config) as app:
        await trio.sleep(10)   # b's health checks fail three times: unhealthy
        reply = await request(app, "GET", "/v1/models/extended")
        assert reply.status == 200 and reply.json()["object"] == "list"
        rows = data(reply)
        assert list(rows) == ["custom/gpt-5.6-sol", "gpt-5.6-sol", "plain", "unsloth/Qwen3.6-35B-A3B-GGUF"]
        custom = rows["custom/gpt-5.6-sol"]
        assert custom["metadata"]["pricing"]["image_input_tokens"] == 8.0
        assert custom["resolution"] == {"entry_id": "gpt-5.6-sol", "stage": "HF_PREFIX",
                                        "matched": "gpt-5.6-sol", "backend_layer": None}
        assert custom["backend_status"] == [{"name": "b", "state": "unhealthy", "routable": False,
                                             "circuit": "closed"}]
        assert rows["gpt-5.6-sol"]["backend_status"] == [{"name": "a", "state": "healthy", "routable": True,
                                                          "circuit": "closed"}]
        assert rows["plain"]["metadata"] is None and rows["plain"]["resolution"] is None


async def test_one_model_by_id_including_hf_ids_with_slashes(autojump_clock, config):
    async with gateway(config) as app:
        reply = await request(app, "GET", "/v1/models/unsloth/Qwen3.6-35B-A3B-GGUF")
        assert reply.status == 200
        body = reply.json()
        assert body["id"] == "unsloth/Qwen3.6-35B-A3B-GGUF" and body["object"] == "model"
        assert body["resolution"]["stage"] == "HF_PREFIX"
        assert body["metadata"] == {"display_name": "Qwen3.6 35B A3B"}
        sol = (await request(app, "GET", "/v1/models/gpt-5.6-sol")).json()
        assert sol == data(await request(app, "GET", "/v1/models/extended"))["gpt-5.6-sol"]


@pytest.mark.parametrize("path", ["/v1/models/nope", "/v1/models/gpt-5.6",       # an alias is not a listed id
                                  "/v1/models/secret", "/v1/models/unsloth/nope"])
async def test_unknown_model_is_404_model_not_found(autojump_clock, config, path):
    async with gateway(config) as app:
        reply = await request(app, "GET", path)
        assert reply.status == 404
        error = reply.json()["error"]
        assert error["code"] == "model_not_found" and error["param"] == "model"
        assert path[len("/v1/models/"):] in error["message"]


async def test_refresh_and_extended_keep_their_own_routes(autojump_clock, config):
    async with gateway(config) as app:
        assert (await request(app, "GET", "/v1/models/refresh")).status == 405
        assert (await request(app, "POST", "/v1/models/extended")).status == 405
        assert (await request(app, "POST", "/v1/models/gpt-5.6-sol")).status == 405
        assert (await request(app, "GET", "/v1/models/")).status == 404           # no model named
        assert (await request(app, "GET", "/v1/models/")).json()["error"]["code"] == "not_found"


DISCOVERED = """
discovery: {interval: 1h}
health_checks: {interval: 1h, path: /health}
backends:
  - {name: a, type: simulated, models: [llama-3-8b], internal: true}
  - {name: globbed, type: generic, url: "http://a.simulated", models: ["llama-*"]}
"""


async def test_the_three_routes_share_the_models_limit(autojump_clock, config):
    async with gateway(config) as app:
        paths = ["/v1/models", "/v1/models/extended", "/v1/models/gpt-5.6-sol"] * 4
        statuses = [(await request(app, "GET", p)).status for p in paths[:11]]
        assert statuses == [200] * 10 + [429]
        refused = await request(app, "GET", "/v1/models/gpt-5.6-sol")
        assert refused.status == 429 and refused.json()["error"]["code"] == "rate_limit_exceeded"


async def test_the_three_routes_share_one_cache(autojump_clock):
    async with gateway(DISCOVERED) as app:
        discovery = app.runtime.discovery
        t0 = trio.current_time()
        assert list(data(await request(app, "GET", "/v1/models/extended"))) == ["llama-3-8b"]
        discovery.view = {**discovery.view, "globbed": frozenset({"llama-3-8b", "llama-3-70b"})}
        await trio.sleep_until(t0 + 29.999)
        assert list(data(await request(app, "GET", "/v1/models"))) == ["llama-3-8b"]
        assert (await request(app, "GET", "/v1/models/llama-3-70b")).status == 404
        await trio.sleep_until(t0 + 30)
        assert list(data(await request(app, "GET", "/v1/models"))) == ["llama-3-70b", "llama-3-8b"]
        assert (await request(app, "GET", "/v1/models/llama-3-70b")).status == 200
        assert list(data(await request(app, "GET", "/v1/models/extended"))) == ["llama-3-70b", "llama-3-8b"]


async def test_refresh_clears_the_cache_for_all_three(autojump_clock):
    async with gateway(DISCOVERED.replace("[llama-3-8b]", "[phi-3]")) as app:
        sim = app.runtime.upstream.simulated["a.simulated"]
        assert (await request(app, "GET", "/v1/models/llama-3-8b")).status == 404
        sim.models = ("llama-3-8b", "phi-3")
        assert (await request(app, "POST", "/v1/models/refresh")).status == 200
        assert (await request(app, "GET", "/v1/models/llama-3-8b")).status == 200


async def test_a_backend_alias_is_listed_and_retrievable(autojump_clock):
    config = """
health_checks: {interval: 1h}
backends:
  - name: g
    type: simulated
    models: [gemini-3.1-pro-preview]
    model_configs:
      - {id: gemini-3.1-pro-preview, aliases: [gemini-3.1-pro], metadata: {display_name: Gemini 3.1 Pro}}
"""
    async with gateway(config) as app:
        rows = data(await request(app, "GET", "/v1/models"))
        assert rows["gemini-3.1-pro"] == {**rows["gemini-3.1-pro-preview"], "id": "gemini-3.1-pro"}
        one = (await request(app, "GET", "/v1/models/gemini-3.1-pro")).json()
        assert one["resolution"]["alias_of"] == "gemini-3.1-pro-preview"
        assert one["metadata"] == {"display_name": "Gemini 3.1 Pro"}
