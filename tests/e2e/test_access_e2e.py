"""End-to-end: API keys, client provider preferences and the parameter policy through the official
openai SDK on a real socket."""

from __future__ import annotations

import json

import openai
import pytest

from tests.e2e.support import backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

KEY = "sk-e2e-team-0123456789abcdef"


def config() -> dict:
    return gateway_config(
        backend("near"), backend("far"),
        api_keys=[{"id": "team", "key": KEY, "allowed_models": ["demo"], "allowed_backends": ["near", "far"]}],
        proxy={"client_provider_preferences": True},
        request_params={"defaults": {"max_tokens": 64}, "limits": {"temperature": {"max": 1.0}}},
    )


async def test_keys_preferences_and_policy_through_the_sdk(start_gateway):
    gw = await start_gateway(config())
    messages = [{"role": "user", "content": "hi"}]
    good = openai.OpenAI(base_url=gw.v1, api_key=KEY, max_retries=0, timeout=10)
    bad = openai.OpenAI(base_url=gw.v1, api_key="sk-wrong-0123456789abcdef", max_retries=0, timeout=10)
    with good, bad:
        def answer():
            return good.chat.completions.with_raw_response.create(
                model="demo", messages=messages, temperature=1.7, extra_body={"provider": {"only": ["far"]}})

        def streamed():
            with good.chat.completions.create(model="demo", messages=messages, stream=True,
                                              extra_body={"provider": {"order": ["near"]}}) as stream:
                return list(stream)

        raw = await in_thread(answer)
        chunks = await in_thread(streamed)
        with pytest.raises(openai.AuthenticationError):
            await in_thread(lambda: bad.chat.completions.create(model="demo", messages=messages))
        with pytest.raises(openai.PermissionDeniedError) as denied:
            await in_thread(lambda: good.chat.completions.create(model="other", messages=messages))
        with pytest.raises(openai.BadRequestError) as unsatisfiable:
            await in_thread(lambda: good.chat.completions.create(
                model="demo", messages=messages, extra_body={"provider": {"ignore": ["near", "far"]}}))
        listed = await in_thread(lambda: [m.id for m in good.models.list()])
    assert raw.headers["x-continuum-request-params"] == "default:max_tokens,limit:temperature"
    assert "Hello from far" in raw.parse().choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert denied.value.code == "model_not_allowed"
    assert unsatisfiable.value.code == "provider_preferences_unsatisfiable"
    assert listed == ["demo"]
    far = [json.loads(r.content) for r in gw.sim("far").requests if r.url.path.endswith("/chat/completions")]
    near = [json.loads(r.content) for r in gw.sim("near").requests if r.url.path.endswith("/chat/completions")]
    assert len(far) == 1 and len(near) == 1
    assert far[0]["temperature"] == 1.0 and far[0]["max_tokens"] == 64 and "provider" not in far[0]


async def test_a_wrong_key_is_invalid_request_error_as_on_openai(start_gateway):
    gw = await start_gateway(config())
    bad = openai.OpenAI(base_url=gw.v1, api_key="sk-wrong-0123456789abcdef", max_retries=0, timeout=10)
    with bad, pytest.raises(openai.AuthenticationError) as refused:
        await in_thread(lambda: bad.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hi"}]))
    assert refused.value.status_code == 401
    assert refused.value.body["type"] == "invalid_request_error" and refused.value.code == "invalid_api_key"
