"""What a client may ask of the operator's Anthropic key: backends[].anthropic_betas and the server-side features."""

import json
import logging

import attrs
import pytest

from switchyard.actors.errors import UnsupportedRequestParameter
from switchyard.actors.messages import Call
from switchyard.config.load import ConfigError, load_text
from switchyard.config.schema import BackendConfig, BackendType, BodyExtensions, Snapshot
from switchyard.protocol.doors.anthropic_format import NOT_CARRIED
from switchyard.protocol.wires.anthropic import headers, messages_request
from switchyard.protocol.wires.anthropic_betas import forwarded_betas
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

BACKEND = BackendConfig(name="claude", type=BackendType.ANTHROPIC, url="https://api.anthropic.com",
                        api_key="sk-ant-test", models=("claude-x",))
CLIENT = "prompt-caching-2024-07-31, files-api-2025-04-14,context-1m-2025-08-07"

CONFIG = """
health_checks: {interval: 1h}
retry: {max_attempts: 1}
backends:
  - name: claude
    type: anthropic
    url: http://claude.simulated
    api_key: sk-ant-test
    models: [claude-x]
    anthropic_betas: [prompt-caching-2024-07-31]
"""


def backend(line: str) -> BackendConfig:
    return load_text("backends:\n  - " + line).snapshot.backends[0]


def errors(line: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_text("backends:\n  - " + line)
    return err.value.errors


def call(payload: dict, ingress: dict | None = None) -> Call:
    return Call(model=payload["model"], stream=False, body=json.dumps(payload).encode(), payload=payload,
                snapshot=Snapshot(), ingress=ingress or {})


def translate(b: BackendConfig = BACKEND, **fields) -> dict:
    payload = {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}], **fields}
    return messages_request(payload, b, call(payload))


ANTHROPIC = "{name: c, type: anthropic, models: [m], "


# --- config ------------------------------------------------------------------------------

def test_anthropic_betas_absent_means_forward_what_the_client_sends():
    assert backend(ANTHROPIC + "}").anthropic_betas is None
    assert forwarded_betas(BACKEND, CLIENT) == CLIENT


def test_anthropic_betas_empty_forwards_none():
    b = backend(ANTHROPIC + "anthropic_betas: []}")
    assert b.anthropic_betas == ()
    assert forwarded_betas(b, CLIENT) is None


def test_anthropic_betas_forwards_only_the_listed_names_in_the_clients_order():
    b = backend(ANTHROPIC + "anthropic_betas: [context-1m-2025-08-07, prompt-caching-2024-07-31]}")
    assert forwarded_betas(b, CLIENT) == "prompt-caching-2024-07-31,context-1m-2025-08-07"
    assert forwarded_betas(b, "files-api-2025-04-14") is None
    assert forwarded_betas(b, None) is None


def test_anthropic_betas_are_compared_exactly():
    b = attrs.evolve(BACKEND, anthropic_betas=("files-api-2025-04-14",))
    assert forwarded_betas(b, "Files-API-2025-04-14") is None


def test_dropped_betas_are_logged_at_debug_by_name_only(caplog):
    b = attrs.evolve(BACKEND, anthropic_betas=("prompt-caching-2024-07-31",))
    with caplog.at_level(logging.DEBUG, logger="switchyard.route"):
        forwarded_betas(b, CLIENT)
    [record] = caplog.records
    assert record.levelno == logging.DEBUG
    assert record.getMessage() == ("anthropic-beta not allowed on backend claude, not sent: "
                                   "files-api-2025-04-14, context-1m-2025-08-07")
    assert "sk-ant-test" not in record.getMessage()


def test_an_anthropic_beta_name_must_be_an_http_token():
    problems = errors(ANTHROPIC + "anthropic_betas: [ok-1, 'two words', 'a,b', 7, '']}")
    assert [e.split(":")[0] for e in problems] == ["backends[0].anthropic_betas[1]", "backends[0].anthropic_betas[2]",
                                                   "backends[0].anthropic_betas[3]", "backends[0].anthropic_betas[4]"]
    assert "printable ASCII" in problems[0] and "'two words'" in problems[0] and "integer" in problems[2]


def test_an_anthropic_beta_name_appears_once():
    assert errors(ANTHROPIC + "anthropic_betas: [a-1, a-1]}") == [
        "backends[0].anthropic_betas[1]: duplicate anthropic-beta name 'a-1'"]


def test_anthropic_betas_must_be_a_list():
    assert errors(ANTHROPIC + "anthropic_betas: a-1}") == [
        "backends[0].anthropic_betas: must be a list of anthropic-beta names, got string"]


def test_anthropic_betas_only_apply_to_anthropic_backends():
    assert errors("{name: c, type: openai, url: 'https://x.example/v1', anthropic_betas: [a-1]}") == [
        "backends[0].anthropic_betas: only applies to backends of type anthropic, not openai"]


def test_the_wire_sends_only_the_allowed_betas():
    b = attrs.evolve(BACKEND, anthropic_betas=("prompt-caching-2024-07-31",))
    payload = {"model": "claude-x", "messages": []}
    sent = dict(headers(b, call(payload, {"anthropic-beta": CLIENT})))
    assert sent["anthropic-beta"] == "prompt-caching-2024-07-31"
    sent = dict(headers(attrs.evolve(b, anthropic_betas=()), call(payload, {"anthropic-beta": CLIENT})))
    assert "anthropic-beta" not in sent


# --- server-side features on the chat -> anthropic wire -------------------------------------

@pytest.mark.parametrize("field", sorted(NOT_CARRIED))
def test_a_server_side_feature_the_messages_ingress_refuses_is_refused_on_the_wire(field):
    with pytest.raises(UnsupportedRequestParameter) as err:
        translate(**{field: {"anything": True}})
    assert err.value.status == 400 and err.value.param == field
    assert err.value.code == "unsupported_request_parameter" and f"'{field}'" in str(err.value)


def test_a_server_side_feature_the_operators_request_extensions_write_passes():
    b = attrs.evolve(BACKEND, request_extensions=BodyExtensions(overrides={"container": "c-1"}))
    assert translate(b, container="c-1")["container"] == "c-1"
    with pytest.raises(UnsupportedRequestParameter):   # a client's own value is not the operator's
        translate(attrs.evolve(b, request_extensions=BodyExtensions(defaults={"container": "c-1"})),
                  container="c-2")


def test_other_fields_chat_does_not_know_still_pass_as_they_are():
    out = translate(service_tier="auto", thinking={"type": "enabled", "budget_tokens": 1024})
    assert out["service_tier"] == "auto" and out["thinking"] == {"type": "enabled", "budget_tokens": 1024}


# --- through the gateway ---------------------------------------------------------------------

async def test_a_messages_clients_beta_not_allowed_never_reaches_the_backend(autojump_clock):
    body = {"model": "claude-x", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/anthropic/v1/messages", body,
                              headers=[(b"anthropic-version", b"2023-06-01"), (b"anthropic-beta", CLIENT.encode())])
        assert reply.status == 200, reply.body
        sent = app.runtime.upstream.simulated["claude.simulated"].requests[-1].headers
        assert sent["anthropic-beta"] == "prompt-caching-2024-07-31"


async def test_a_chat_clients_server_side_feature_passes_the_anthropic_backend_over(autojump_clock):
    config = CONFIG.replace("retry:", "selection_strategy: RoundRobin\nretry:") + \
        "  - {name: spare, type: simulated, models: [claude-x], simulation: {latency: 0s}}\n"
    async with gateway(config) as app:   # round robin: one of the two calls is offered to claude first
        for _ in range(2):
            reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", mcp_servers=[{"url": "x"}]))
            assert reply.status == 200   # the spare took it
        assert app.runtime.upstream.simulated["claude.simulated"].count("request") == 0
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("claude-x", mcp_servers=[{"url": "x"}]))
        error = reply.json()["error"]
        assert reply.status == 400 and error["code"] == "unsupported_request_parameter"
        assert error["param"] == "mcp_servers"
