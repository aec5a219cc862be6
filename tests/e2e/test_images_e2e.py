"""End-to-end: the images API through hypercorn on 127.0.0.1, the official openai SDK as the client.

Generations (JSON), edits and variations (multipart uploads) are routed like
every call (selection, failover before the first byte), priced per image in
the ledger, bounded in size, and edits and variations take only their fixed
lists of model names, judged before any alias is rewritten.
"""

from __future__ import annotations

import base64
import io
from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest
import trio

from switchyard.protocol.simulated.images import image_for, png
from tests.e2e.support import Gateway, gateway_config, in_thread

# reads what the simulated backends saw; the SDK marks create_variation deprecated (the API still serves it)
pytestmark = [pytest.mark.simulator_history, pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")]

PNG = png((10, 20, 30))


def images_backend(name: str, models: list[str], **simulation: Any) -> dict[str, Any]:
    sim: dict[str, Any] = {"latency": "5ms", "tokens_per_second": 0}
    sim.update(simulation)
    return {"name": name, "type": "simulated", "models": models, "simulation": sim}


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)


def upload(name: str = "image.png") -> tuple[str, io.BytesIO, str]:
    return (name, io.BytesIO(PNG), "image/png")


async def test_generations_answer_the_sdk_with_decodable_images(start_gateway):
    gw = await start_gateway(gateway_config(images_backend("sim-a", ["dall-e-2"])))
    with sdk(gw) as client:
        result = await in_thread(client.images.generate, model="dall-e-2", prompt="a red fox", n=2,
                                 size="256x256", response_format="b64_json")
    assert [base64.b64decode(d.b64_json) for d in result.data] == [image_for("dall-e-2", "a red fox", i)
                                                                     for i in range(2)]
    assert gw.sim("sim-a").requests[0].url.path == "/v1/images/generations"


async def test_edits_relay_the_upload_and_its_fields_to_the_backend(start_gateway):
    gw = await start_gateway(gateway_config(images_backend("sim-a", ["gpt-image-1"])))
    with sdk(gw) as client:
        result = await in_thread(client.images.edit, model="gpt-image-1", image=upload(), prompt="add a hat",
                                 mask=upload("mask.png"))
    assert base64.b64decode(result.data[0].b64_json) == image_for("gpt-image-1", "add a hat", 0)
    assert result.usage is not None and result.usage.input_tokens > 0
    sent = gw.sim("sim-a").requests[0]
    assert sent.url.path == "/v1/images/edits"
    assert sent.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert sent.content.count(PNG) == 2 and b'name="mask"; filename="mask.png"' in sent.content


async def test_variations_answer_with_urls_when_asked(start_gateway):
    gw = await start_gateway(gateway_config(images_backend("sim-a", ["dall-e-2"])))
    with sdk(gw) as client:
        result = await in_thread(client.images.create_variation, model="dall-e-2", image=upload(), n=3,
                                 response_format="url")
    assert len(result.data) == 3 and all(d.url.startswith("data:image/png;base64,") for d in result.data)


async def test_a_failed_backend_fails_over_before_the_first_byte(start_gateway):
    config = gateway_config(images_backend("sim-a", ["dall-e-2"], failure={"status": 503}),
                            images_backend("sim-b", ["dall-e-2"]))
    gw = await start_gateway(config)
    with sdk(gw) as client:   # the first attempt pinned to the failing backend
        result = await in_thread(client.images.create_variation, model="dall-e-2", image=upload(),
                                 extra_headers={"x-backend": "sim-a"})
    assert len(result.data) == 1
    assert gw.sim("sim-a").count("status:503") >= 1 and gw.sim("sim-b").count("completed") == 1
    assert PNG in gw.sim("sim-b").requests[0].content   # the same upload, written again for the second backend


async def test_the_ledger_prices_generated_images_per_image_by_size_and_quality(start_gateway):
    priced = {"id": "dall-e-3", "metadata": {"pricing": {
        "input_tokens": 0, "output_tokens": 0, "per_image": {"1024x1024": {"standard": 0.04, "hd": 0.08}}}}}
    config = gateway_config({**images_backend("sim-a", ["dall-e-3"]), "model_configs": [priced]},
                            usage={"ledger": "memory"})
    gw = await start_gateway(config)
    with sdk(gw) as client:
        raw = await in_thread(client.images.with_raw_response.generate, model="dall-e-3", prompt="a lighthouse",
                              quality="hd", size="1024x1024")
    assert raw.headers["x-continuum-cost"] == "0.08"
    assert "x-continuum-cost-estimated" not in raw.headers
    ledger = gw.app.runtime.ledger
    with trio.fail_after(10):   # the call is recorded once its answer went out: after the client read it
        while not ledger.store.for_request(raw.headers["x-request-id"]):
            await ledger.flush()
            await trio.sleep(0.01)
    [record] = ledger.store.for_request(raw.headers["x-request-id"])
    assert (record.endpoint, record.model, Decimal(str(record.cost)), record.estimated) == \
        ("images_generations", "dall-e-3", Decimal("0.08"), False)


async def test_an_upload_over_max_upload_bytes_is_a_413_naming_the_limit(start_gateway):
    config = gateway_config(images_backend("sim-a", ["dall-e-2"]))
    config["server"]["max_upload_bytes"] = 2048
    gw = await start_gateway(config)
    big = ("big.png", io.BytesIO(PNG + b"\0" * 4096), "image/png")
    with sdk(gw) as client, pytest.raises(openai.APIStatusError) as refused:
        await in_thread(client.images.create_variation, model="dall-e-2", image=big)
    assert refused.value.status_code == 413
    assert "2048 bytes" in refused.value.message and "server.max_upload_bytes" in refused.value.message
    assert gw.sim("sim-a").requests == []


async def test_an_upload_larger_than_max_body_bytes_is_served_under_max_upload_bytes(start_gateway):
    gw = await start_gateway(gateway_config(images_backend("sim-a", ["dall-e-2"])))   # max_body_bytes: 4096
    big = ("big.png", io.BytesIO(PNG + b"\0" * 8192), "image/png")
    with sdk(gw) as client:
        result = await in_thread(client.images.create_variation, model="dall-e-2", image=big)
    assert len(result.data) == 1


async def test_variations_take_only_their_fixed_model_list_before_alias_rewriting(start_gateway):
    """``dall-e-latest`` is an alias of dall-e-2, dispatched as dall-e-2 on generations; variations judge the
    name the client sent, which is not on their list."""
    alias = {"id": "dall-e-2", "aliases": ["dall-e-latest"]}
    gw = await start_gateway(gateway_config({**images_backend("sim-a", ["dall-e-2"]), "model_configs": [alias]}))
    with sdk(gw) as client:
        made = await in_thread(client.images.generate, model="dall-e-latest", prompt="a boat")
        with pytest.raises(openai.BadRequestError) as refused:
            await in_thread(client.images.create_variation, model="dall-e-latest", image=upload())
    assert len(made.data) == 1
    assert refused.value.body["param"] == "model" and refused.value.body["code"] == "unsupported_model"
    assert "dall-e-2" in refused.value.message
    assert [r.url.path for r in gw.sim("sim-a").requests] == ["/v1/images/generations"]


async def test_edits_refuse_a_model_off_their_list(start_gateway):
    gw = await start_gateway(gateway_config(images_backend("sim-a", ["dall-e-3"])))
    with sdk(gw) as client, pytest.raises(openai.BadRequestError) as refused:
        await in_thread(client.images.edit, model="dall-e-3", image=upload(), prompt="x")
    assert refused.value.body["code"] == "unsupported_model"


async def test_a_model_family_limit_is_a_400_naming_the_field(start_gateway):
    gw = await start_gateway(gateway_config(images_backend("sim-a", ["dall-e-3"])))
    with sdk(gw) as client, pytest.raises(openai.BadRequestError) as refused:
        await in_thread(client.images.generate, model="dall-e-3", prompt="two boats", n=2)
    assert refused.value.body["param"] == "n" and "between 1 and 1" in refused.value.message


async def test_a_form_without_its_image_file_is_a_400_naming_image(start_gateway):
    gw = await start_gateway(gateway_config(images_backend("sim-a", ["dall-e-2"])))
    async with httpx.AsyncClient(base_url=gw.v1, timeout=10) as http:
        response = await http.post("/images/variations", data={"model": "dall-e-2"},
                                   files={"other": ("a.png", PNG, "image/png")})
    assert response.status_code == 400 and response.json()["error"]["param"] == "image"


async def test_an_images_backend_type_that_does_not_speak_it_is_refused(start_gateway):
    native = {"name": "claude", "type": "anthropic", "url": "http://127.0.0.1:9", "models": ["dall-e-2"],
              "api_key": "k"}
    gw = await start_gateway(gateway_config(native))
    with sdk(gw) as client, pytest.raises(openai.BadRequestError) as refused:
        await in_thread(client.images.generate, model="dall-e-2", prompt="a fox")
    assert refused.value.body["code"] == "unsupported_backend_type"


async def test_an_upload_attempt_carries_the_backends_upstream_id_in_its_form(start_gateway):
    wire = {"id": "dall-e-2", "upstream_id": "dalle2-local"}
    gw = await start_gateway(gateway_config({**images_backend("sim-a", ["dall-e-2"]), "model_configs": [wire]}))
    with sdk(gw) as client:
        await in_thread(client.images.create_variation, model="dall-e-2", image=upload())
    sent = gw.sim("sim-a").requests[0].content
    assert b'name="model"\r\n\r\ndalle2-local\r\n' in sent and PNG in sent


async def test_a_403_after_alias_dispatch_names_the_model_the_client_asked_for(start_gateway):
    """The key may use dall-e-2 but not the alias; the refusal names the alias, never the canonical id."""
    alias = {"id": "dall-e-2", "aliases": ["dall-e-latest"]}
    key = "sk-images-e2e-0123456789abcdef"
    gw = await start_gateway(gateway_config({**images_backend("sim-a", ["dall-e-2"]), "model_configs": [alias]},
                                            api_keys=[{"id": "k", "key": key, "allowed_models": ["dall-e-2"]}]))
    with openai.OpenAI(base_url=gw.v1, api_key=key, max_retries=0, timeout=10) as client, \
            pytest.raises(openai.PermissionDeniedError) as refused:
        await in_thread(client.images.generate, model="dall-e-latest", prompt="a boat")
    assert "'dall-e-latest'" in refused.value.message and "'dall-e-2'" not in refused.value.message
    assert gw.sim("sim-a").requests == []
