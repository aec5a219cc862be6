"""global_prompts loading, the sandbox, and the PromptStore: priority, files, cache cap, poll (MockClock)."""

import logging
import os
from pathlib import Path

import pytest
import trio

import switchyard.actors.prompts
from switchyard.actors.prompts import PromptStore
from switchyard.config import load_prompts
from switchyard.config.load import ConfigError, load_text
from switchyard.config.load_prompts import PromptFileError, Sandbox
from switchyard.config.prompts import MAX_CACHE_BYTES, MAX_FILE_BYTES, GlobalPrompts, MergeStrategy
from switchyard.config.rules import Problems

BACKENDS = """
backends:
  - {name: openai, type: simulated, models: [gpt-4]}
  - {name: anthropic, type: simulated, models: [claude]}
"""


def load(tmp_path: Path, section: str) -> GlobalPrompts:
    return load_text(BACKENDS + "global_prompts:\n" + section, base_dir=tmp_path).snapshot.global_prompts


def errors(tmp_path: Path, section: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, section)
    return info.value.errors


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- config ---------------------------------------------------------------------

def test_absent_section_is_off_and_serves_no_prompt(tmp_path):
    config = load_text(BACKENDS, base_dir=tmp_path).snapshot.global_prompts
    assert config == GlobalPrompts(base_dir=str(tmp_path)) and not config.enabled
    assert PromptStore(config).prompt_for("gpt-4", "openai") is None
    assert PromptStore(GlobalPrompts()).prompt_for("gpt-4", "openai") is None


def test_every_key_is_read_with_its_default(tmp_path):
    write(tmp_path / "prompts" / "system.md", "sys")
    config = load(tmp_path, '  prompts_dir: ./prompts\n  default_file: system.md\n  merge_strategy: append\n'
                            '  separator: "\\n---\\n"\n')
    assert (config.prompts_dir, config.default.prompt_file, config.merge_strategy, config.separator) == \
        ("prompts", "system.md", MergeStrategy.APPEND, "\n---\n")
    plain = load(tmp_path, "  default: hi\n")
    assert (plain.prompts_dir, plain.merge_strategy, plain.separator) == (".", MergeStrategy.PREPEND, "\n\n")


def test_unknown_keys_and_bad_values_name_their_path(tmp_path):
    found = errors(tmp_path, "  bogus: 1\n  merge_strategy: middle\n  separator: 3\n"
                             "  models:\n    gpt-4: {prompt: x, colour: red}\n    claude: {}\n")
    assert "global_prompts.bogus: unknown key" in found
    assert "global_prompts.models.gpt-4.colour: unknown key" in found
    assert "global_prompts.models.claude: needs prompt or prompt_file" in found
    assert any(e.startswith("global_prompts.merge_strategy: must be one of prepend, append, replace") for e in found)
    assert "global_prompts.separator: must be a string, got integer" in found


def test_missing_prompt_file_is_an_error_naming_its_path(tmp_path):
    found = errors(tmp_path, "  models:\n    gpt-4: {prompt_file: nope.md}\n")
    assert found == [f"global_prompts.models.gpt-4.prompt_file: 'nope.md' does not exist in the sandbox {tmp_path}"]


def test_prompt_file_must_be_utf8_text(tmp_path):
    (tmp_path / "bin.md").write_bytes(b"\xff\xfe\x00junk")
    found = errors(tmp_path, "  default_file: bin.md\n")
    assert found == ["global_prompts.default_file: must be UTF-8 text; byte 0 is not"]


def test_prompts_dir_must_be_relative_and_inside_the_config_directory(tmp_path):
    assert errors(tmp_path, "  prompts_dir: /etc\n") == [
        "global_prompts.prompts_dir: must be a path relative to the config directory, got '/etc'"]
    assert errors(tmp_path, "  prompts_dir: ../elsewhere\n") == [
        "global_prompts.prompts_dir: must stay inside the config directory (no '..'), got '../elsewhere'"]


def test_backend_names_must_be_configured_backends():
    config = GlobalPrompts(backends={"openai": load_prompts.PromptSource(prompt="x"),
                                     "opnai": load_prompts.PromptSource(prompt="y")})
    problems = Problems()
    load_prompts.check_backends(config, {"openai", "anthropic"}, problems)
    assert problems.errors == ["global_prompts.backends.opnai: no backend is named 'opnai'"]


# --- priority -------------------------------------------------------------------

def test_priority_model_over_backend_over_default(tmp_path):
    store = PromptStore(load(tmp_path, "  default: D\n  backends:\n    openai: {prompt: B}\n"
                                       "  models:\n    gpt-4: {prompt: M}\n"))
    assert store.prompt_for("gpt-4", "openai") == "M"
    assert store.prompt_for("gpt-4", "anthropic") == "M"      # the model level wins on any backend
    assert store.prompt_for("gpt-3.5", "openai") == "B"
    assert store.prompt_for("claude", "anthropic") == "D"


def test_file_beats_inline_at_each_level(tmp_path):
    for name in ("d.md", "b.md", "m.md"):
        write(tmp_path / "p" / name, f"from {name}\n")
    store = PromptStore(load(tmp_path, "  prompts_dir: p\n  default: D\n  default_file: d.md\n"
                                       "  backends:\n    openai: {prompt: B, prompt_file: b.md}\n"
                                       "  models:\n    gpt-4: {prompt: M, prompt_file: m.md}\n"))
    assert store.prompt_for("gpt-4", "openai") == "from m.md"
    assert store.prompt_for("x", "openai") == "from b.md"
    assert store.prompt_for("x", "anthropic") == "from d.md"


def test_prompt_texts_are_served_without_surrounding_whitespace(tmp_path):
    store = PromptStore(load(tmp_path, "  default: |\n    Follow the policy.\n\n"))
    assert store.prompt_for("x", "y") == "Follow the policy."


def test_an_empty_prompt_opts_a_model_out_of_the_lower_levels(tmp_path):
    store = PromptStore(load(tmp_path, '  default: D\n  models:\n    gpt-4: {prompt: ""}\n'))
    assert store.prompt_for("gpt-4", "openai") is None
    assert store.prompt_for("claude", "anthropic") == "D"


def test_merge_into_uses_the_configured_strategy_and_separator(tmp_path):
    store = PromptStore(load(tmp_path, '  default: G\n  merge_strategy: append\n  separator: " | "\n'))
    payload = {"model": "x", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}]}
    out = store.merge_into(payload, "x", "openai")
    assert out["messages"][0]["content"] == "S | G" and payload["messages"][0]["content"] == "S"


# --- the sandbox ------------------------------------------------------------------

def test_sandbox_traversal_refused(tmp_path):
    write(tmp_path / "secret.md", "secret")
    sandbox = Sandbox(tmp_path, Path("prompts"))
    (tmp_path / "prompts").mkdir()
    with pytest.raises(PromptFileError) as info:
        sandbox.resolve("../secret.md")
    assert info.value.rule == "no_traversal"
    found = errors(tmp_path, "  prompts_dir: prompts\n  default_file: sub/../../secret.md\n")
    assert found[0].startswith("global_prompts.default_file: must not contain '..'")


def test_sandbox_absolute_path_refused(tmp_path):
    write(tmp_path / "x.md", "x")
    with pytest.raises(PromptFileError) as info:
        Sandbox(tmp_path, Path(".")).resolve(str(tmp_path / "x.md"))
    assert info.value.rule == "relative_only"
    found = errors(tmp_path, f"  backends:\n    openai: {{prompt_file: {tmp_path / 'x.md'}}}\n")
    assert found[0].startswith("global_prompts.backends.openai.prompt_file: must be a relative path")


def test_sandbox_symlink_escape_refused(tmp_path):
    outside = write(tmp_path / "outside" / "secret.md", "secret")
    (tmp_path / "cfg" / "prompts").mkdir(parents=True)
    os.symlink(outside, tmp_path / "cfg" / "prompts" / "link.md")
    os.symlink(tmp_path / "outside", tmp_path / "cfg" / "prompts" / "dirlink")
    sandbox = Sandbox(tmp_path / "cfg", Path("prompts"))
    for name in ("link.md", "dirlink/secret.md"):
        with pytest.raises(PromptFileError) as info:
            sandbox.read(name)
        assert info.value.rule == "inside_sandbox"
    found = errors(tmp_path / "cfg", "  prompts_dir: prompts\n  default_file: link.md\n")
    assert found[0].startswith("global_prompts.default_file: resolves outside the sandbox")


def test_sandbox_symlink_loop_is_an_error_not_a_crash(tmp_path):
    os.symlink(tmp_path / "b.md", tmp_path / "a.md")
    os.symlink(tmp_path / "a.md", tmp_path / "b.md")
    found = errors(tmp_path, "  default_file: a.md\n")
    assert len(found) == 1 and found[0].startswith("global_prompts.default_file: ")


def test_sandbox_symlink_inside_is_followed(tmp_path):
    real = write(tmp_path / "prompts" / "..data" / "system.md", "kept in a ConfigMap")
    os.symlink(real, tmp_path / "prompts" / "system.md")
    assert Sandbox(tmp_path, Path("prompts")).read("system.md").text == "kept in a ConfigMap"


def test_sandbox_oversize_file_refused(tmp_path):
    (tmp_path / "big.md").write_bytes(b"x" * (MAX_FILE_BYTES + 1))
    (tmp_path / "max.md").write_bytes(b"x" * MAX_FILE_BYTES)
    assert Sandbox(tmp_path, Path(".")).read("max.md").size == MAX_FILE_BYTES
    found = errors(tmp_path, "  default_file: big.md\n")
    assert found == [f"global_prompts.default_file: is {MAX_FILE_BYTES + 1} bytes; a prompt file may be at "
                     f"most 1 MiB ({MAX_FILE_BYTES} bytes)"]


def test_cache_cap_50_mib_refuses_the_file_that_would_pass_it(tmp_path):
    block = b"x" * MAX_FILE_BYTES
    lines = []
    for i in range(51):
        (tmp_path / f"m{i}.md").write_bytes(block)
        lines.append(f"    model-{i}: {{prompt_file: m{i}.md}}\n")
    found = errors(tmp_path, "  models:\n" + "".join(lines))
    assert len(found) == 1 and found[0].startswith("global_prompts.models.model-50.prompt_file: 'm50.md'")
    assert f"past its 50 MiB limit ({MAX_CACHE_BYTES} bytes)" in found[0]


def test_cache_cap_in_the_store_keeps_the_last_good_text(tmp_path, monkeypatch, caplog):
    path = write(tmp_path / "a.md", "small")
    store = PromptStore(load(tmp_path, "  default_file: a.md\n"))
    monkeypatch.setattr(switchyard.actors.prompts, "MAX_CACHE_BYTES", 100)
    write(path, "y" * 200)
    with caplog.at_level(logging.ERROR, "switchyard.prompts"):
        assert store.poll() == []
    assert store.prompt_for("x", "y") == "small"
    assert "past its 50 MiB limit" in caplog.text and "keeping its last good text" in caplog.text
    assert store.listing()["prompts"][0]["error"].startswith("'a.md' (200 bytes) would take the prompt cache")


# --- keeping up with the disk ----------------------------------------------------------

async def test_a_file_changed_on_disk_is_picked_up_by_the_poll(tmp_path, autojump_clock):
    path = write(tmp_path / "prompts" / "system.md", "old")
    store = PromptStore(load(tmp_path, "  prompts_dir: prompts\n  default_file: system.md\n"))
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        write(path, "new policy, longer")
        assert store.prompt_for("x", "y") == "old"        # not before the next poll
        await trio.sleep(switchyard.actors.prompts.POLL_INTERVAL + 0.5)
        assert store.prompt_for("x", "y") == "new policy, longer"
        nursery.cancel_scope.cancel()


async def test_a_deleted_file_keeps_its_last_good_text_until_it_returns(tmp_path, autojump_clock):
    path = write(tmp_path / "system.md", "v1")
    store = PromptStore(load(tmp_path, "  default_file: system.md\n"))
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run)
        path.unlink()
        await trio.sleep(1.5)
        assert store.prompt_for("x", "y") == "v1"
        assert store.listing()["prompts"][0]["error"] == "was deleted"
        write(path, "version 2")
        await trio.sleep(1.5)
        assert store.prompt_for("x", "y") == "version 2"
        assert store.listing()["prompts"][0]["error"] is None
        nursery.cancel_scope.cancel()


def test_reconfigure_on_hot_reload_switches_prompts(tmp_path):
    write(tmp_path / "a.md", "A")
    write(tmp_path / "b.md", "B")
    store = PromptStore(load(tmp_path, "  default_file: a.md\n"))
    store.reconfigure(load(tmp_path, "  default_file: b.md\n  models:\n    gpt-4: {prompt: M}\n"))
    assert (store.prompt_for("x", "y"), store.prompt_for("gpt-4", "y")) == ("B", "M")
    store.reconfigure(GlobalPrompts())
    assert store.prompt_for("gpt-4", "y") is None


async def test_reload_rereads_every_file_and_reports(tmp_path):
    a, b = write(tmp_path / "a.md", "A"), write(tmp_path / "b.md", "B")
    store = PromptStore(load(tmp_path, "  default_file: a.md\n  models:\n    gpt-4: {prompt_file: b.md}\n"))
    write(a, "A2")
    b.write_bytes(b"\xff")
    summary = await store.reload()
    assert summary["result"] == "partial" and summary["changed"] == ["a.md"] and summary["files"] == 2
    assert summary["errors"] == [{"path": "b.md", "error": "must be UTF-8 text; byte 0 is not"}]
    assert (store.prompt_for("x", "y"), store.prompt_for("gpt-4", "y")) == ("A2", "B")
