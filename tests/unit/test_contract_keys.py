"""One test per rule of the contract keys Switchyard does not implement (``config/contract.py``)."""

import pytest

from switchyard.config.contract import DOC, UNSUPPORTED
from switchyard.config.load import ConfigError, load_text
from switchyard.protocol.serving.cli import main

MINIMAL = """
backends:
  - {name: sim, type: simulated, models: [demo]}
"""

REFUSED = "part of the configuration contract but not supported by Switchyard"


def refused(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_text(MINIMAL + text, env={})
    return info.value


def test_a_top_level_contract_key_is_refused_by_name_with_the_doc():
    key = "control_plane"
    err = refused(f"{key}: {{enabled: true}}\n")
    assert err.errors == [f"{key}: {REFUSED} (see {DOC})"]
    assert err.unsupported == [key]


@pytest.mark.parametrize("text, path", [
    ("prefix_routing: {salt_echo: true}\n", "prefix_routing.salt_echo"),
    ("server: {socket_mode: '0660'}\n", "server.socket_mode"),
    ("kv_cache_index: {backend: redis}\n", "kv_cache_index.backend"),
])
def test_a_nested_contract_key_is_refused_at_its_dotted_path(text, path):
    assert refused(text).errors == [f"{path}: {REFUSED} (see {DOC})"]


def test_a_contract_key_is_refused_even_when_it_turns_the_feature_off():
    assert refused("control_plane: {enabled: false}\n").unsupported == ["control_plane"]


def test_a_truly_unknown_key_keeps_its_error():
    err = refused("web_serch: {}\nfallback: {quality: 1}\n")
    assert err.errors == ["fallback.quality: unknown key", "web_serch: unknown key"]
    assert err.unsupported == []


def test_the_same_name_elsewhere_is_an_unknown_key():
    # only the contract's place for a key is the contract's key
    assert refused("fallback: {salt_echo: true}\n").errors == ["fallback.salt_echo: unknown key"]


def test_every_refused_key_is_reported_in_one_load():
    err = refused("kv_cache_index: {backend: redis}\ncontrol_plane: {}\n"
                  "prefix_routing: {salt_echo: true}\nbogus: 1\n")
    assert sorted(err.unsupported) == ["control_plane", "kv_cache_index.backend", "prefix_routing.salt_echo"]
    assert "bogus: unknown key" in err.errors and len(err.errors) == 4


def test_every_table_entry_links_a_doc_page_that_has_the_section():
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    for u in UNSUPPORTED.values():
        page, anchor = u.doc.split("#")
        text = (root / page).read_text(encoding="utf-8")
        assert f"`{u.path}`" in text, u.path
        assert any(line.startswith("#") and anchor == _slug(line) for line in text.splitlines()), u.doc


def _slug(heading: str) -> str:
    words = heading.lstrip("#").strip().lower()
    return "".join(ch for ch in words.replace(" ", "-") if ch.isalnum() or ch in "-_")


def test_config_validate_lists_every_contract_key_together(tmp_path, capsys):
    path = tmp_path / "contract.yaml"
    path.write_text(MINIMAL + "kv_cache_index: {backend: redis}\ncontrol_plane: {}\nprefix_routing: {salt_echo: true}\n"
                              "retry: {bogus: 1}\n")
    assert main(["config", "validate", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert f"error: kv_cache_index.backend: {REFUSED} (see {DOC})" in out
    assert f"error: control_plane: {REFUSED} (see {DOC})" in out
    assert f"error: prefix_routing.salt_echo: {REFUSED} (see {DOC})" in out
    assert "error: retry.bogus: unknown key" in out
    assert (f"not supported by Switchyard (3 key(s) of the configuration contract): "
            f"prefix_routing.salt_echo, kv_cache_index.backend, control_plane (see {DOC})") in out
    assert out[-1] == f"{path}: 4 error(s), 0 warning(s)"
