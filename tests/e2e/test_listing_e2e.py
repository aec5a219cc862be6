"""The model-list routes through a real socket with the official openai SDK."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.support import Gateway, backend, gateway_config, in_thread

METADATA = """
models:
  - id: gpt-5.6-sol
    aliases: [gpt-5.6]
    metadata:
      display_name: GPT-5.6 Sol
      capabilities: [chat, tool]
      pricing: {input_tokens: 5.0, output_tokens: 30.0}
      limits: {context_window: 1050000, max_output: 128000}
  - id: qwen3.6-35b-a3b
    metadata: {display_name: Qwen3.6 35B A3B}
"""


def client(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


async def test_openai_sdk_lists_and_retrieves_models_with_metadata(start_gateway, tmp_path: Path):
    (tmp_path / "model-metadata.yaml").write_text(METADATA, encoding="utf-8")
    a = backend("a")
    a["models"] = ["gpt-5.6-sol", "unsloth/Qwen3.6-35B-A3B-GGUF", "plain"]
    gw = await start_gateway(gateway_config(a, model_metadata_file="model-metadata.yaml"))
    sdk = client(gw)

    page = await in_thread(sdk.models.list)
    models = {m.id: m for m in page.data}
    assert list(models) == ["gpt-5.6-sol", "plain", "unsloth/Qwen3.6-35B-A3B-GGUF"]
    sol = models["gpt-5.6-sol"]
    assert (sol.object, sol.created, sol.owned_by) == ("model", 0, "a")
    # Our extra keys survive the SDK's Model (it keeps unknown fields).
    assert sol.model_extra["backends"] == ["a"]
    assert sol.model_extra["metadata"]["display_name"] == "GPT-5.6 Sol"
    assert "metadata" not in models["plain"].model_extra

    one = await in_thread(sdk.models.retrieve, "gpt-5.6-sol")
    assert one.id == "gpt-5.6-sol" and one.model_extra["resolution"]["stage"] == "EXACT_ID"
    # The SDK sends a HuggingFace id's '/' as %2F; the route takes the decoded rest of the path.
    hf = await in_thread(sdk.models.retrieve, "unsloth/Qwen3.6-35B-A3B-GGUF")
    assert hf.id == "unsloth/Qwen3.6-35B-A3B-GGUF"
    assert hf.model_extra["metadata"] == {"display_name": "Qwen3.6 35B A3B"}
    assert hf.model_extra["backend_status"][0]["name"] == "a"

    with pytest.raises(openai.NotFoundError) as caught:
        await in_thread(sdk.models.retrieve, "no-such-model")
    assert caught.value.code == "model_not_found"

    async with httpx.AsyncClient(base_url=gw.v1) as http:
        raw = await http.get("/models/unsloth/Qwen3.6-35B-A3B-GGUF")        # unencoded slashes work too
        assert raw.status_code == 200 and raw.json()["id"] == "unsloth/Qwen3.6-35B-A3B-GGUF"
        extended = await http.get("/models/extended")
        assert [m["id"] for m in extended.json()["data"]] == list(models)
