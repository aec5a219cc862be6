"""API keys: Bearer auth on the data plane, and each key's reach (models, backends, pins, listings)."""

import io
import json
import logging
import re

import pytest

from switchyard.config.load import ConfigError, load_text
from switchyard.protocol.http import logs
from switchyard.protocol.http.auth import open_beyond_loopback
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

TEAM_A = b"sk-team-a-0123456789abcdef"
TEAM_B = b"sk-team-b-0123456789abcdef"
OPEN = b"sk-open-0123456789abcdef"

CONFIG = """
health_checks: {interval: 1h}
api_keys:
  - id: team-a
    key: sk-team-a-0123456789abcdef
    organization_id: org-1
    allowed_models: ["demo*"]
    allowed_backends: [a]
    tier: gold
  - id: team-b
    key: sk-team-b-0123456789abcdef
    allowed_backends: [a]
  - id: open
    key: sk-open-0123456789abcdef
backends:
  - {name: a, type: simulated, models: [demo, demo-2, other], simulation: {latency: 10ms, chunks: 2}}
  - {name: b, type: simulated, models: [demo, other, bee], simulation: {latency: 10ms, chunks: 2}}
fallback:
  enabled: true
  fallback_chains: {demo-2: [other]}
"""


def bearer(secret: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", b"Bearer " + secret)]


def served_by(reply):
    return re.search(r"Hello from (\w+)", reply.json()["choices"][0]["message"]["content"]).group(1)


async def test_missing_key_is_401_with_a_bearer_challenge(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 401
        assert reply.json()["error"]["code"] == "missing_api_key"
        assert reply.headers[b"www-authenticate"].startswith(b"Bearer")


async def test_unknown_key_is_401_and_the_key_is_never_echoed(autojump_clock):
    async with gateway(CONFIG) as app:
        for headers in (bearer(b"sk-nope-0123456789abcdef"), [(b"authorization", b"Basic " + TEAM_A)]):
            reply = await request(app, "POST", "/v1/chat/completions", chat(), headers=headers)
            assert reply.status == 401
            assert reply.json()["error"]["code"] == "invalid_api_key"
            assert b"sk-" not in reply.body


async def test_401_type_follows_the_door(autojump_clock):
    """OpenAI's own answer on /v1 (invalid_request_error), Anthropic's under /anthropic/ (authentication_error)."""
    wrong = bearer(b"sk-nope-0123456789abcdef")
    async with gateway(CONFIG) as app:
        for headers, code in (([], "missing_api_key"), (wrong, "invalid_api_key")):
            reply = await request(app, "POST", "/v1/chat/completions", chat(), headers=headers)
            assert reply.status == 401 and reply.headers[b"www-authenticate"].startswith(b"Bearer")
            assert reply.json()["error"] | {"message": ""} == {"type": "invalid_request_error", "code": code,
                                                                "param": None, "message": ""}
        messages = {"model": "demo", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
        reply = await request(app, "POST", "/anthropic/v1/messages", messages, headers=wrong)
        assert reply.status == 401 and reply.json()["error"]["type"] == "authentication_error"


async def test_every_v1_route_asks_for_the_key_before_the_path(autojump_clock):
    async with gateway(CONFIG) as app:
        for method, path in (("GET", "/v1/models"), ("GET", "/v1/models/extended"), ("GET", "/v1/models/demo"),
                             ("POST", "/v1/models/refresh"), ("GET", "/v1/nope")):
            assert (await request(app, method, path)).status == 401, path


async def test_probes_and_metrics_stay_open(autojump_clock):
    async with gateway(CONFIG) as app:
        for path in ("/health", "/ready", "/metrics"):
            assert (await request(app, "GET", path)).status == 200, path


async def test_anthropic_style_x_api_key_header_is_accepted(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(), headers=[(b"x-api-key", OPEN)])
        assert reply.status == 200


async def test_model_outside_allowed_models_is_403_naming_the_requested_model(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("other"), headers=bearer(TEAM_A))
        assert reply.status == 403
        err = reply.json()["error"]
        assert (err["type"], err["code"], err["param"]) == ("permission_error", "model_not_allowed", "model")
        assert "'other'" in err["message"] and "team-a" in err["message"]


async def test_allowed_models_globs_match_the_requested_name(autojump_clock):
    async with gateway(CONFIG) as app:
        for model in ("demo", "demo-2"):
            reply = await request(app, "POST", "/v1/chat/completions", chat(model), headers=bearer(TEAM_A))
            assert reply.status == 200, model


async def test_allowed_backends_narrow_every_selection(autojump_clock):
    async with gateway(CONFIG) as app:
        picks = {served_by(await request(app, "POST", "/v1/chat/completions", chat(), headers=bearer(TEAM_B)))
                 for _ in range(6)}
        assert picks == {"a"}
        picks = {served_by(await request(app, "POST", "/v1/chat/completions", chat(), headers=bearer(OPEN)))
                 for _ in range(6)}
        assert picks == {"a", "b"}


async def test_model_served_only_by_backends_the_key_may_not_use_is_403(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("bee"), headers=bearer(TEAM_B))
        assert reply.status == 403
        assert reply.json()["error"]["code"] == "backend_not_allowed"
        assert not [r for r in app.runtime.upstream.simulated["b.simulated"].requests
                    if r.url.path.endswith("/chat/completions")]


async def test_x_backend_pin_must_be_a_backend_the_key_may_use(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(),
                              headers=[*bearer(TEAM_B), (b"x-backend", b"b")])
        assert reply.status == 403
        assert (reply.json()["error"]["param"], reply.json()["error"]["code"]) == ("x-backend", "backend_not_allowed")
        reply = await request(app, "POST", "/v1/chat/completions", chat(),
                              headers=[*bearer(TEAM_B), (b"x-backend", b"a")])
        assert reply.status == 200 and served_by(reply) == "a"


async def test_fallback_chain_never_reaches_a_model_the_key_may_not_use(autojump_clock):
    config = """
health_checks: {interval: 1h}
api_keys:
  - {id: narrow, key: sk-narrow-0123456789abcdef, allowed_models: [demo], allowed_backends: [a, c]}
  - {id: wide, key: sk-wide-0123456789abcdef, allowed_backends: [a, c]}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms, failure: {status: 503}}}
  - {name: c, type: simulated, models: [other], simulation: {latency: 10ms, chunks: 2}}
fallback: {enabled: true, fallback_chains: {demo: [other]}}
"""
    async with gateway(config) as app:
        # `other` sits on a backend the key may use, but the key may not ask for `other`
        reply = await request(app, "POST", "/v1/chat/completions", chat(),
                              headers=bearer(b"sk-narrow-0123456789abcdef"))
        assert reply.status == 503
        assert not [r for r in app.runtime.upstream.simulated["c.simulated"].requests
                    if r.url.path.endswith("/chat/completions")]
        # a key that may use both gets the chain's answer
        reply = await request(app, "POST", "/v1/chat/completions", chat(), headers=bearer(b"sk-wide-0123456789abcdef"))
        assert reply.status == 200 and reply.headers[b"x-fallback-model"] == b"other"


async def test_a_models_list_for_aggregators_is_judged_like_model(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat(models=["demo-2", "other"]),
                              headers=bearer(TEAM_A))
        assert reply.status == 403
        assert (reply.json()["error"]["code"], reply.json()["error"]["param"]) == ("model_not_allowed", "models[1]")


async def test_a_variant_is_judged_by_its_base_model(autojump_clock):
    config = CONFIG.replace("allowed_models: [\"demo*\"]", "allowed_models: [\"*o\"]") + \
        "proxy: {variant_suffixes: {enabled: true}}\n"
    async with gateway(config) as app:
        # `other:nitro` matches the glob `*o` as written, but routes as `other`, which does not
        reply = await request(app, "POST", "/v1/chat/completions", chat("other:nitro"), headers=bearer(TEAM_A))
        assert reply.status == 403 and reply.json()["error"]["code"] == "model_not_allowed"
        reply = await request(app, "POST", "/v1/chat/completions", chat("demo:nitro"), headers=bearer(TEAM_A))
        assert reply.status == 200


async def test_a_preset_model_is_judged_like_a_requested_one(autojump_clock):
    config = CONFIG + "request_presets: {sneaky: {model: other}}\n"
    async with gateway(config) as app:
        body = {"preset": "sneaky", "messages": [{"role": "user", "content": "hi"}]}
        reply = await request(app, "POST", "/v1/chat/completions", body, headers=bearer(TEAM_A))
        assert reply.status == 403 and reply.json()["error"]["code"] == "model_not_allowed"


async def test_a_key_revoked_while_the_body_uploads_is_refused(autojump_clock):
    import trio

    from switchyard.config.load import load_text as load

    async with gateway(CONFIG) as app:
        revoked = load(CONFIG.replace("allowed_models: [\"demo*\"]", "allowed_models: [\"nothing\"]")).snapshot
        reply_status = []

        async def slow_upload():
            sent = False

            async def receive():
                nonlocal sent
                if not sent:
                    await trio.sleep(5)          # the body arrives after the reload
                    sent = True
                    return {"type": "http.request", "body": json.dumps(chat()).encode(), "more_body": False}
                await trio.sleep_forever()

            async def send(message):
                if message["type"] == "http.response.start":
                    reply_status.append(message["status"])

            scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": bearer(TEAM_A)}
            await app(scope, receive, send)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_upload)
            await trio.sleep(1)
            app.runtime.apply(revoked)
        assert reply_status == [403]


async def test_model_list_shows_only_what_the_key_may_use(autojump_clock):
    async with gateway(CONFIG) as app:
        models = (await request(app, "GET", "/v1/models", headers=bearer(TEAM_A))).json()["data"]
        rows = {m["id"]: m["backends"] for m in models}
        assert rows == {"demo": ["a"], "demo-2": ["a"]}
        rows = {m["id"] for m in (await request(app, "GET", "/v1/models", headers=bearer(OPEN))).json()["data"]}
        assert rows == {"demo", "demo-2", "other", "bee"}
        extended = (await request(app, "GET", "/v1/models/extended", headers=bearer(TEAM_B))).json()["data"]
        assert {m["id"] for m in extended} == {"demo", "demo-2", "other"}
        assert (await request(app, "GET", "/v1/models/bee", headers=bearer(TEAM_B))).status == 404
        refreshed = await request(app, "POST", "/v1/models/refresh", headers=bearer(TEAM_A))
        assert {m["id"]: m["backends"] for m in refreshed.json()["data"]} == {"demo": ["a"], "demo-2": ["a"]}


async def test_logs_carry_the_key_id_never_the_key(autojump_clock):
    stream = io.StringIO()
    handler = logs.install("info", "json", stream)
    try:
        async with gateway(CONFIG) as app:
            await request(app, "POST", "/v1/chat/completions", chat("other"), headers=bearer(TEAM_A))
    finally:
        logging.getLogger().removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    refused = [line for line in lines if "refused" in line["message"]]
    assert refused and refused[0]["key_id"] == "team-a"
    assert TEAM_A.decode() not in stream.getvalue()


async def test_refusals_are_recorded_as_route_events(autojump_clock):
    async with gateway(CONFIG + "admin: {token: admin-token-0123456789}\n") as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("other"), headers=bearer(TEAM_A))
        rid = reply.headers[b"x-continuum-request-id"].decode()
        events = (await request(app, "GET", f"/admin/requests/{rid}/events",
                                headers=[(b"authorization", b"Bearer admin-token-0123456789")])).json()["events"]
        assert events[-1]["event"] == "failed" and events[-1]["detail"]["code"] == "model_not_allowed"


def test_without_api_keys_serve_warns_only_beyond_loopback():
    open_config = load_text("backends: [{name: a, type: simulated, models: [m]}]").snapshot.api_keys
    keyed = load_text(CONFIG).snapshot.api_keys
    assert open_beyond_loopback("0.0.0.0:8080", open_config)
    assert open_beyond_loopback("gateway.internal:8080", open_config)
    assert not open_beyond_loopback("127.0.0.1:8080", open_config)
    assert not open_beyond_loopback("[::1]:8080", open_config)
    assert not open_beyond_loopback("localhost:8080", open_config)
    assert not open_beyond_loopback("0.0.0.0:8080", keyed)


@pytest.mark.parametrize("entry, path, rule", [
    ("{id: a, key: sk-0123456789abcdefgh}\n  - {id: a, key: sk-other-0123456789abc}", "api_keys[1].id", "duplicate"),
    ("{id: a, key: sk-0123456789abcdefgh}\n  - {id: b, key: sk-0123456789abcdefgh}", "api_keys[1].key", "same secret"),
    ("{id: a}", "api_keys[0].key", "is required"),
    ("{id: a, key: ''}", "api_keys[0].key", "must not be empty"),
    ("{id: a, key: sk-0123456789abcdefgh, allowed_models: []}", "api_keys[0].allowed_models", "must not be empty"),
    ("{id: a, key: sk-0123456789abcdefgh, allowed_backends: [nope]}", "api_keys[0].allowed_backends[0]", "no backend"),
    ("{id: a, key: sk-0123456789abcdefgh, scopes: [x]}", "api_keys[0].scopes", "unknown key"),
    ("{id: 'a b', key: sk-0123456789abcdefgh}", "api_keys[0].id", "must be"),
])
def test_api_key_config_errors_name_the_path(entry, path, rule):
    with pytest.raises(ConfigError) as exc:
        load_text(f"api_keys:\n  - {entry}\nbackends: [{{name: a, type: simulated, models: [m]}}]")
    assert any(e.startswith(path + ":") and rule in e for e in exc.value.errors), exc.value.errors


def test_a_key_from_an_unset_environment_variable_is_an_error_naming_its_path():
    with pytest.raises(ConfigError) as exc:
        load_text("api_keys: [{id: a, key: '${TEAM_KEY}'}]\nbackends: [{name: a, type: simulated, models: [m]}]",
                  env={})
    assert any(e.startswith("api_keys[0].key:") and "TEAM_KEY" in e for e in exc.value.errors)
    loaded = load_text("api_keys: [{id: a, key: '${TEAM_KEY}'}]\nbackends: [{name: a, type: simulated, models: [m]}]",
                       env={"TEAM_KEY": "sk-from-env-0123456789"})
    assert loaded.snapshot.api_keys.find(b"sk-from-env-0123456789").id == "a"
    assert "sk-from-env" not in repr(loaded.snapshot.api_keys)


def test_a_short_key_is_a_warning():
    loaded = load_text("api_keys: [{id: a, key: short}]\nbackends: [{name: a, type: simulated, models: [m]}]")
    assert any(w.startswith("api_keys[0].key:") for w in loaded.warnings)


ALIAS_GLOB = """
api_keys:
  - {id: pub, key: sk-pub-0123456789abcdef, allowed_models: ["pub-*"]}
  - {id: named, key: sk-named-0123456789abcdef, allowed_models: [pub-alias]}
  - {id: both, key: sk-both-0123456789abcdef, allowed_models: ["pub-*", secret-model]}
backends:
  - name: a
    type: simulated
    models: [secret-model]
    model_configs: [{id: secret-model, aliases: [pub-alias]}]
"""
ALIAS_GLOB_WARNING = ("api_keys[0].allowed_models: key 'pub': 'pub-*' matches the alias 'pub-alias', which is "
                      "routed as 'secret-model', a model the list does not match")


def test_a_glob_admitting_an_alias_but_not_its_model_warns():
    """Only the glob case: a key that lists the alias by name, or also matches the model, meant it."""
    warnings = [w for w in load_text(ALIAS_GLOB).warnings if w.startswith("api_keys")]
    assert len(warnings) == 1 and warnings[0].startswith(ALIAS_GLOB_WARNING), warnings


def test_config_validate_prints_the_alias_glob_warning(tmp_path, capsys):
    from switchyard.protocol.serving.cli import main

    path = tmp_path / "keys.yaml"
    path.write_text(ALIAS_GLOB)
    assert main(["config", "validate", str(path)]) == 0
    assert "warning: " + ALIAS_GLOB_WARNING in capsys.readouterr().out


def test_serve_logs_the_alias_glob_warning_at_start(tmp_path, monkeypatch, caplog):
    from switchyard.protocol.serving import cli
    from switchyard.protocol.serving import workers as serving

    path = tmp_path / "keys.yaml"
    path.write_text(ALIAS_GLOB)
    monkeypatch.setattr(cli, "configure_logging", lambda *args: None)   # keep pytest's log capture
    monkeypatch.setattr(serving, "serve_one", lambda *args, **kwargs: 0)   # start-up only, no server
    with caplog.at_level(logging.WARNING, logger="switchyard.config"):
        assert cli.main(["serve", "--config", str(path), "--bind", "127.0.0.1:8080"]) == 0
    assert any(r.name == "switchyard.config" and r.getMessage().startswith(ALIAS_GLOB_WARNING)
               for r in caplog.records), caplog.records


async def test_admin_config_masks_client_keys_and_shows_no_digest(autojump_clock):
    async with gateway(CONFIG + "admin: {token: admin-token-0123456789}\n") as app:
        reply = await request(app, "GET", "/admin/config",
                              headers=[(b"authorization", b"Bearer admin-token-0123456789")])
        assert reply.status == 200
        keys = reply.json()["api_keys"]
        assert [k["id"] for k in keys["keys"]] == ["team-a", "team-b", "open"]
        assert {k["key"] for k in keys["keys"]} == {"***"}
        assert "by_digest" not in keys
        assert b"sk-" not in reply.body
