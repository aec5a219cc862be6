"""What reaches a backend: presets, the parameter policy, global prompts and body extensions, on the
request path with retries and fallback hops (autojump_clock, simulated backends)."""

import json

import pytest

from switchyard.config.load import load_text
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

BASE = """
health_checks: {interval: 1h}
retry: {max_attempts: 1}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms, chunks: 2}}
  - {name: b, type: simulated, models: [spare], simulation: {latency: 10ms, chunks: 2}}
"""
FAILING_A = BASE.replace("simulation: {latency: 10ms, chunks: 2}}\n  - {name: b",
                         "simulation: {latency: 10ms, chunks: 2, failure: {status: 503}}}\n  - {name: b")
CHAIN = "fallback: {enabled: true, fallback_chains: {demo: [spare]}}\n"
TRIMMING_CHAIN = "fallback: {enabled: true, fallback_chains: {demo: [spare]}, " \
                 "fallback_policy: {preserve_parameters: false}}\n"


def bodies(app, backend):
    return [json.loads(r.content) for r in app.runtime.upstream.simulated[f"{backend}.simulated"].requests
            if r.url.path.endswith("/chat/completions")]


async def post(app, body, headers=None):
    return await request(app, "POST", "/v1/chat/completions", body, headers=headers)


async def test_policy_values_reach_the_backend_and_the_header_names_actions_not_values(autojump_clock):
    config = BASE + "request_params: {defaults: {max_tokens: 100}, overrides: {top_p: 0.5}, " \
                    "limits: {temperature: {max: 1}}}\n"
    async with gateway(config) as app:
        reply = await post(app, chat(temperature=1.9, top_p=0.5))
        assert reply.status == 200
        assert reply.headers[b"x-continuum-request-params"] == b"default:max_tokens,limit:temperature"
        sent = bodies(app, "a")[0]
        assert (sent["max_tokens"], sent["temperature"], sent["top_p"]) == (100, 1, 0.5)


async def test_nothing_changed_means_no_header_and_the_clients_own_bytes(autojump_clock):
    config = BASE + "request_params: {limits: {temperature: {max: 1}}}\n"
    async with gateway(config) as app:
        raw = b'{"model":"demo","messages":[{"role":"user","content":"hi"}],"temperature":0.3}'
        reply = await post(app, raw)
        assert reply.status == 200 and b"x-continuum-request-params" not in reply.headers
        assert app.runtime.upstream.simulated["a.simulated"].requests[-1].content == raw


async def test_the_header_rides_on_a_relayed_backend_error(autojump_clock):
    config = FAILING_A + "request_params: {defaults: {max_tokens: 100}}\n"
    async with gateway(config) as app:
        reply = await post(app, chat())
        assert reply.status == 503
        assert reply.headers[b"x-continuum-request-params"] == b"default:max_tokens"


async def test_scope_is_fixed_before_selection_and_kept_on_fallback_hops(autojump_clock):
    config = FAILING_A + TRIMMING_CHAIN + """request_params:
  models:
    demo: {overrides: {temperature: 0.1}, limits: {max_tokens: {max: 100}}}
    spare: {overrides: {temperature: 0.9}}
"""
    async with gateway(config) as app:
        reply = await post(app, chat(max_completion_tokens=100000, top_p=0.3))
        assert reply.status == 200 and reply.headers[b"x-fallback-model"] == b"spare"
        # the hop keeps the scope of the model the client asked for, and the policy's fields
        # travel in the spelling they were written in, though the hop trims the rest
        sent = bodies(app, "b")[0]
        assert (sent["temperature"], sent["max_completion_tokens"]) == (0.1, 100)
        assert "top_p" not in sent and "max_tokens" not in sent


async def test_a_managed_field_the_route_cannot_carry_is_refused_before_any_io(autojump_clock):
    config = BASE.replace("health_checks: {interval: 1h}", "health_checks: {enabled: false}") + """\
  - {name: cloud, type: openai, url: "https://api.example.invalid", models: [spare], discovery: false}
request_params: {overrides: {top_k: 40}}
""" + CHAIN
    async with gateway(config) as app:
        reply = await post(app, chat())
        assert reply.status == 400
        err = reply.json()["error"]
        assert (err["code"], err["param"]) == ("unsupported_request_parameter", "top_k")
        assert "cloud" in err["message"] and b"x-continuum-request-params" not in reply.headers
        assert bodies(app, "a") == []


async def test_a_reload_that_adds_a_route_that_cannot_carry_a_managed_field_refuses_from_then_on(autojump_clock):
    config = BASE.replace("health_checks: {interval: 1h}", "health_checks: {enabled: false}") + \
        "request_params: {overrides: {top_k: 40}}\n" + CHAIN
    async with gateway(config) as app:
        assert (await post(app, chat())).status == 200   # every backend carries top_k
        assert bodies(app, "a")[0]["top_k"] == 40
        app.runtime.apply(load_text(config.replace("request_params:", """\
  - {name: cloud, type: openai, url: "https://api.example.invalid", models: [spare], discovery: false}
request_params:""")).snapshot)
        reply = await post(app, chat())
        assert reply.status == 400
        assert (reply.json()["error"]["code"], reply.json()["error"]["param"]) == ("unsupported_request_parameter",
                                                                                   "top_k")
        assert len(bodies(app, "a")) == 1


async def test_a_pinned_backend_is_checked_for_what_it_can_carry(autojump_clock):
    config = BASE.replace("health_checks: {interval: 1h}", "health_checks: {enabled: false}") + """\
  - {name: cloud, type: openai, url: "https://api.example.invalid", models: [demo], discovery: false}
request_params: {overrides: {top_k: 40}}
proxy: {client_provider_preferences: true}
"""
    async with gateway(config) as app:
        # the client's filter leaves only `a`, but the pin still sends the first attempt to `cloud`
        reply = await post(app, chat(provider={"ignore": ["cloud"]}), headers=[(b"x-backend", b"cloud")])
        assert reply.status == 400 and reply.json()["error"]["code"] == "unsupported_request_parameter"
        assert bodies(app, "a") == []


async def test_preset_fills_model_and_params_and_never_reaches_the_backend(autojump_clock):
    config = BASE + """request_presets:
  support: {model: spare, params: {temperature: 0.2, max_tokens: 50}}
request_params: {defaults: {max_tokens: 999, top_p: 0.7}}
"""
    async with gateway(config) as app:
        body = {"preset": "support", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}
        assert (await post(app, body)).status == 200
        sent = bodies(app, "b")[0]
        # request > preset > request_params.defaults
        assert (sent["max_tokens"], sent["temperature"], sent["top_p"]) == (20, 0.2, 0.7)
        assert "preset" not in sent
        # a request model wins over the preset's
        assert (await post(app, {**body, "model": "demo"})).status == 200 and len(bodies(app, "a")) == 1
        reply = await post(app, {**body, "preset": "nope"})
        assert reply.status == 400 and reply.json()["error"]["code"] == "preset_not_found"


async def test_global_prompt_priority_reaches_each_backend(autojump_clock, tmp_path):
    (tmp_path / "spare.md").write_text("Spare rules.")
    config = BASE + CHAIN + """
global_prompts:
  default: Be kind.
  backends: {b: {prompt: Backend b rules.}}
  models: {spare: {prompt: inline loses, prompt_file: spare.md}}
"""
    async with gateway(config, base_dir=tmp_path) as app:
        await post(app, chat(messages=[{"role": "system", "content": "Client rules."},
                                       {"role": "user", "content": "hi"}]))
        await post(app, chat("spare"))
        # model > backend > default; the file beats the inline prompt; prepend into the client's own
        assert bodies(app, "a")[0]["messages"][0] == {"role": "system", "content": "Be kind.\n\nClient rules."}
        assert bodies(app, "b")[0]["messages"][0] == {"role": "system", "content": "Spare rules."}


async def test_request_extensions_merge_leaf_by_leaf_into_each_backends_body(autojump_clock):
    config = BASE.replace("models: [demo], simulation: {latency: 10ms, chunks: 2}}",
                          "models: [demo], simulation: {latency: 10ms, chunks: 2}, request_extensions: {body: "
                          "{defaults: {temperature: 0.3, metadata: {team: x, env: prod}}, "
                          "overrides: {metadata: {env: staging}}}}}")
    async with gateway(config) as app:
        await post(app, chat(temperature=0.9, metadata={"team": "client"}))
        sent = bodies(app, "a")[0]
        assert sent["temperature"] == 0.9
        assert sent["metadata"] == {"team": "client", "env": "staging"}
