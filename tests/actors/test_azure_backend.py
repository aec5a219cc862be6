"""Azure OpenAI backends (type azure): OpenAI's wire under the resource's /openai/v1 root, the key in api-key."""

import json

import pytest

from switchyard.config.load import ConfigError, load_text
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

CONFIG = """
health_checks: {interval: 1h}
backends:
  - name: az
    type: azure
    url: http://myres.simulated/openai/v1
    api_key: az-key-123
    models: [gpt-deploy]
    simulation: {latency: 10ms, chunks: 2}
"""


def sim(app):
    return app.runtime.upstream.simulated["myres.simulated"]


async def test_chat_goes_to_the_v1_root_with_the_key_in_api_key(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("gpt-deploy"))
        assert reply.status == 200
        sent = [r for r in sim(app).requests if r.url.path.endswith("/chat/completions")][-1]
        assert sent.url.path == "/openai/v1/chat/completions"
        assert sent.headers["api-key"] == "az-key-123" and "authorization" not in sent.headers


async def test_an_azure_backend_takes_v1_responses(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/responses", {"model": "gpt-deploy", "input": "hi"})
        assert reply.status == 200
        assert [r.url.path for r in sim(app).requests][-1] == "/openai/v1/responses"


async def test_a_responses_only_model_on_azure_is_bridged_not_refused(autojump_clock):
    cfg = CONFIG + "    model_configs:\n      - {id: gpt-deploy, metadata: {responses_only: true}}\n"
    async with gateway(cfg) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("gpt-deploy"))
        assert reply.status == 200 and reply.json()["object"] == "chat.completion"
        assert json.loads(sim(app).requests[-1].content)["input"]


def test_an_azure_url_must_be_the_resources_v1_root():
    with pytest.raises(ConfigError) as info:
        load_text("backends:\n  - {name: a, type: azure, url: 'https://x.openai.azure.com', models: [m]}\n")
    assert info.value.errors == ["backends[0].url: of an azure backend is its resource's v1 API root, "
                                 "https://NAME.openai.azure.com/openai/v1, got 'https://x.openai.azure.com'"]
