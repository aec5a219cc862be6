"""/admin/config/prompts: list, get, put, reload, every refusal, and hot reload (MockClock)."""

import contextlib
from pathlib import Path

import pytest
import trio

import switchyard.actors.prompts
from switchyard.config.load import load_file, load_text
from switchyard.config.prompts import MAX_FILE_BYTES
from switchyard.protocol.serving.app import App
from switchyard.protocol.serving.wiring import new_runtime
from tests.harness import request

TOKEN = "admin-token-0123456789"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]
BASE = "/admin/config/prompts"

CONFIG = f"""
admin: {{token: {TOKEN}}}
health_checks: {{enabled: false}}
backends:
  - {{name: openai, type: simulated, models: [gpt-4]}}
global_prompts:
  prompts_dir: ./prompts
  default_file: system.md
  backends:
    openai: {{prompt: "inline for openai"}}
  models:
    gpt-4: {{prompt_file: gpt4.md, prompt: "shadowed"}}
"""


def files(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "system.md").write_text("# System\nBe safe.\n")
    (tmp_path / "prompts" / "gpt4.md").write_text("GPT-4 rules")
    (tmp_path / "config.yaml").write_text("not a prompt")


@contextlib.asynccontextmanager
async def gateway(tmp_path: Path, config: str = CONFIG, *, path: Path | None = None):
    """Like tests.harness.gateway, with the config directory at ``tmp_path``."""
    snapshot = (load_file(path) if path else load_text(config, base_dir=tmp_path)).snapshot
    async with trio.open_nursery() as nursery:
        runtime = await nursery.start(new_runtime(snapshot, config_path=str(path) if path else None, watch=False).run)
        yield App(lambda: snapshot, runtime=runtime)
        nursery.cancel_scope.cancel()


def error(reply) -> tuple[int, str, str | None]:
    e = reply.json()["error"]
    return reply.status, e["code"], e["param"]


async def test_every_prompt_route_needs_the_admin_token(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        for method, path in [("GET", BASE), ("GET", BASE + "/prompts/system.md"),
                             ("PUT", BASE + "/prompts/system.md"), ("POST", BASE + "/reload")]:
            reply = await request(app, method, path, {"content": "x"})
            assert reply.status == 401, path
        assert app.runtime.prompts.prompt_for("x", "y") == "# System\nBe safe."


async def test_without_admin_token_the_prompt_routes_do_not_exist(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path, CONFIG.replace(f"admin: {{token: {TOKEN}}}", "")) as app:
        assert (await request(app, "GET", BASE, headers=AUTH)).status == 404


async def test_list_shows_levels_sources_sizes_and_hashes_but_no_text(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        reply = await request(app, "GET", BASE, headers=AUTH)
        assert reply.status == 200
        body = reply.json()
        assert body["sandbox"] == str((tmp_path / "prompts").resolve())
        assert (body["prompts_dir"], body["merge_strategy"], body["separator"]) == ("prompts", "prepend", "\n\n")
        rows = [(p["level"], p["name"], p["source"], p["path"], p["active"]) for p in body["prompts"]]
        assert rows == [("default", None, "file", "prompts/system.md", True),
                        ("backend", "openai", "inline", None, True),
                        ("model", "gpt-4", "file", "prompts/gpt4.md", True),
                        ("model", "gpt-4", "inline", None, False)]
        assert body["prompts"][0]["size"] == len("# System\nBe safe.\n") and len(body["prompts"][0]["sha256"]) == 16
        assert b"Be safe" not in reply.body and b"inline for openai" not in reply.body
        assert body["cache_bytes"] == len("# System\nBe safe.\n") + len("GPT-4 rules")


async def test_get_returns_one_file(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        reply = await request(app, "GET", BASE + "/prompts/system.md", headers=AUTH)
        assert reply.status == 200
        assert reply.json()["path"] == "prompts/system.md" and reply.json()["content"] == "# System\nBe safe.\n"
        assert error(await request(app, "GET", BASE + "/prompts/nope.md", headers=AUTH)) == \
            (404, "prompt_not_found", "path")


async def test_put_applies_on_the_next_prompt_for(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        reply = await request(app, "PUT", BASE + "/prompts/system.md",
                              {"content": "# Updated system prompt\n\nNew content."}, headers=AUTH)
        assert reply.status == 200 and reply.json()["in_use"] and not reply.json()["created"]
        assert app.runtime.prompts.prompt_for("other", "other") == "# Updated system prompt\n\nNew content."
        assert (tmp_path / "prompts" / "system.md").read_text() == "# Updated system prompt\n\nNew content."
        assert sorted(p.name for p in (tmp_path / "prompts").iterdir()) == ["gpt4.md", "system.md"]  # no temp left
        await trio.sleep(3)                       # the poll sees its own write as nothing new
        assert app.runtime.prompts.prompt_for("other", "other") == "# Updated system prompt\n\nNew content."


async def test_put_creates_a_new_file_in_the_sandbox(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        reply = await request(app, "PUT", BASE + "/prompts/new.md", {"content": "draft"}, headers=AUTH)
        assert reply.status == 201 and reply.json() == {
            "path": "prompts/new.md", "size": 5, "sha256": reply.json()["sha256"], "created": True, "in_use": False}
        assert (tmp_path / "prompts" / "new.md").read_text() == "draft"
        assert error(await request(app, "PUT", BASE + "/prompts/sub/new.md", {"content": "x"}, headers=AUTH)) == \
            (404, "prompt_not_found", "path")          # a PUT makes files, not directories


@pytest.mark.parametrize("method", ["GET", "PUT"])
@pytest.mark.parametrize("path, code", [
    ("/prompts/../config.yaml", "invalid_prompt_path"),            # traversal
    ("//etc/passwd.md", "invalid_prompt_path"),                    # absolute
    ("/config.yaml", "prompt_path_outside_sandbox"),               # outside prompts_dir
    ("/other/system.md", "prompt_path_outside_sandbox"),
    ("/prompts/notes.yaml", "prompt_path_not_allowed"),            # neither configured nor .md/.txt
])
async def test_paths_outside_the_rules_are_refused(tmp_path, autojump_clock, method, path, code):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        reply = await request(app, method, BASE + path, {"content": "x"}, headers=AUTH)
        assert error(reply) == (400, code, "path")
        assert "(rule: " in reply.json()["error"]["message"]
        assert (tmp_path / "config.yaml").read_text() == "not a prompt"


async def test_put_symlink_escape_refused(tmp_path, autojump_clock):
    files(tmp_path)
    (tmp_path / "outside.md").write_text("keep")
    (tmp_path / "prompts" / "link.md").symlink_to(tmp_path / "outside.md")
    async with gateway(tmp_path) as app:
        reply = await request(app, "PUT", BASE + "/prompts/link.md", {"content": "x"}, headers=AUTH)
        assert error(reply) == (400, "prompt_path_outside_sandbox", "path")
        assert (tmp_path / "outside.md").read_text() == "keep"


async def test_put_oversize_content_refused(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        reply = await request(app, "PUT", BASE + "/prompts/system.md", {"content": "x" * (MAX_FILE_BYTES + 1)},
                              headers=AUTH)
        assert error(reply) == (413, "prompt_file_too_large", "content")
        assert (tmp_path / "prompts" / "system.md").read_text() == "# System\nBe safe.\n"


async def test_put_past_the_cache_cap_refused(tmp_path, autojump_clock, monkeypatch):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        monkeypatch.setattr(switchyard.actors.prompts, "MAX_CACHE_BYTES", 64)
        reply = await request(app, "PUT", BASE + "/prompts/system.md", {"content": "y" * 60}, headers=AUTH)
        assert error(reply) == (413, "prompt_cache_full", "content")
        assert app.runtime.prompts.prompt_for("x", "y") == "# System\nBe safe."


@pytest.mark.parametrize("body, code, param", [
    (b"not json", "invalid_json", None),
    ({"text": "x"}, "unknown_parameter", "text"),
    ({}, "missing_required_parameter", "content"),
    ({"content": 3}, "invalid_type", "content"),
    ({"content": "a\u0000b"}, "prompt_not_utf8", "content"),
    (b'{"content": "\\ud800"}', "prompt_not_utf8", "content"),      # a lone surrogate
])
async def test_put_body_must_be_content_string(tmp_path, autojump_clock, body, code, param):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        reply = await request(app, "PUT", BASE + "/prompts/system.md", body, headers=AUTH)
        assert error(reply) == (400, code, param)


async def test_other_methods_on_a_prompt_file_are_405(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        reply = await request(app, "DELETE", BASE + "/prompts/system.md", headers=AUTH)
        assert reply.status == 405 and reply.headers[b"allow"] == b"GET, PUT"


async def test_reload_rereads_files_200_or_422(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        (tmp_path / "prompts" / "gpt4.md").write_text("GPT-4 rules, edited")
        reply = await request(app, "POST", BASE + "/reload", headers=AUTH)
        # While reload waits on its worker thread the MockClock may jump and let the poll
        # get there first, so `changed` is either; test_prompt_store pins it down exactly.
        assert reply.status == 200 and reply.json()["changed"] in ([], ["prompts/gpt4.md"])
        assert app.runtime.prompts.prompt_for("gpt-4", "openai") == "GPT-4 rules, edited"
        (tmp_path / "prompts" / "gpt4.md").unlink()
        reply = await request(app, "POST", BASE + "/reload", headers=AUTH)
        assert reply.status == 422 and reply.json()["errors"][0]["path"] == "prompts/gpt4.md"
        assert app.runtime.prompts.prompt_for("gpt-4", "openai") == "GPT-4 rules, edited"   # last good text


async def test_file_routes_are_off_without_a_global_prompts_section(tmp_path, autojump_clock):
    files(tmp_path)
    config = CONFIG[:CONFIG.index("global_prompts:")]
    async with gateway(tmp_path, config) as app:
        reply = await request(app, "GET", BASE + "/prompts/system.md", headers=AUTH)
        assert error(reply) == (404, "prompts_not_configured", "path")
        assert (await request(app, "GET", BASE, headers=AUTH)).json()["prompts"] == []


async def test_hot_reload_of_the_config_reconfigures_the_store(tmp_path, autojump_clock):
    files(tmp_path)
    path = tmp_path / "switchyard.yaml"
    path.write_text(CONFIG)
    async with gateway(tmp_path, path=path) as app:
        assert app.runtime.prompts.prompt_for("gpt-4", "openai") == "GPT-4 rules"
        path.write_text(CONFIG.replace("prompt_file: gpt4.md, ", "") + "  merge_strategy: replace\n")
        assert app.runtime.reload_from_file("test")["result"] == "applied"
        assert app.runtime.prompts.prompt_for("gpt-4", "openai") == "shadowed"
        assert app.runtime.prompts.config.merge_strategy.value == "replace"


async def test_with_the_config_directory_as_sandbox_only_configured_files_are_reachable(tmp_path, autojump_clock):
    (tmp_path / "system.md").write_text("Be safe.")
    (tmp_path / "gpt4.md").write_text("GPT-4 rules")
    (tmp_path / "notes.txt").write_text("secret notes")
    config = CONFIG.replace("  prompts_dir: ./prompts\n", "")
    async with gateway(tmp_path, config) as app:
        assert (await request(app, "GET", BASE + "/system.md", headers=AUTH)).status == 200
        assert error(await request(app, "GET", BASE + "/notes.txt", headers=AUTH))[:2] == \
            (400, "prompt_path_not_allowed")
        assert error(await request(app, "PUT", BASE + "/README.md", {"content": "x"}, headers=AUTH))[:2] == \
            (400, "prompt_path_not_allowed")
        assert not (tmp_path / "README.md").exists()


async def test_admin_config_never_shows_inline_prompt_texts(tmp_path, autojump_clock):
    files(tmp_path)
    async with gateway(tmp_path) as app:
        reply = await request(app, "GET", "/admin/config", headers=AUTH)
        assert reply.status == 200
        assert b"inline for openai" not in reply.body and b"shadowed" not in reply.body
        assert reply.json()["global_prompts"]["backends"]["openai"]["prompt"] == "***"
