"""``switchyard orgs`` in-process on a SQLite data dir: made, listed, shown, changed and deleted, read by the API's
body rules, audited as the CLI's user."""

from __future__ import annotations

import getpass
import json

import pytest

from switchyard.config.usage import UsageConfig
from switchyard.protocol.serving.cli import main
from switchyard.protocol.stores.control import open_control_store


@pytest.fixture
def config(tmp_path) -> str:
    path = tmp_path / "switchyard.yaml"
    path.write_text(f"server: {{data_dir: '{tmp_path / 'data'}'}}\n"
                    "backends:\n  - {name: a, type: simulated, models: [demo]}\n"
                    "organizations:\n  - {id: config-org, budget: {limit_usd: 10}}\n")
    return str(path)


def orgs(capsys, config: str, *argv: str) -> tuple[int, str, str]:
    rc = main(["orgs", argv[0], "--config", config, *argv[1:]])
    out, err = capsys.readouterr()
    return rc, out, err


def test_create_show_update_and_delete(config, capsys):
    rc, out, err = orgs(capsys, config, "create", "acme", "--budget", "limit_usd=50,period=month", "--json")
    assert rc == 0, err
    assert json.loads(out)["budget"] == {"limit_usd": 50.0, "limit_tokens": None, "period": "month"}
    rc, out, _ = orgs(capsys, config, "update", "acme", "--clear", "budget", "--rate-limit",
                      "requests_per_minute=60", "--json")
    shown = json.loads(out)
    assert rc == 0 and shown["budget"] is None and shown["rate_limit"]["requests_per_minute"] == 60
    rc, out, _ = orgs(capsys, config, "list", "--json")
    assert [(o["id"], o["source"]) for o in json.loads(out)["organizations"]] == [
        ("config-org", "config"), ("acme", "database")]
    assert orgs(capsys, config, "delete", "acme")[0] == 0
    assert orgs(capsys, config, "show", "acme")[0] == 1


def test_a_bad_option_names_it_and_nothing_is_made(config, capsys):
    rc, _, err = orgs(capsys, config, "create", "acme", "--budget", "limit_usd=0")
    assert rc == 1 and "--budget limit_usd: must be a positive number of US dollars, got 0" in err
    assert orgs(capsys, config, "show", "acme")[0] == 1


def test_a_config_organizations_id_is_refused(config, capsys):
    rc, _, err = orgs(capsys, config, "create", "config-org")
    assert rc == 1 and "is an organization of the config" in err


def test_changes_are_audited_as_the_clis_user(config, tmp_path, capsys):
    orgs(capsys, config, "create", "acme")
    store = open_control_store(UsageConfig(), tmp_path / "data")
    store.open()
    try:
        entries = store.audit({}, 10)
    finally:
        store.close()
    assert [(e.action, e.actor) for e in entries] == [("organization.create", f"cli:{getpass.getuser()}")]


def test_the_mcp_allowlists_are_set_replaced_and_cleared(config, capsys):
    rc, out, err = orgs(capsys, config, "create", "acme", "--allowed-mcp-server", "github",
                        "--allowed-mcp-server", "files*", "--allowed-mcp-tool", "github__search_*", "--json")
    assert rc == 0, err
    shown = json.loads(out)
    assert (shown["allowed_mcp_servers"], shown["allowed_mcp_tools"]) == (["github", "files*"], ["github__search_*"])
    rc, out, err = orgs(capsys, config, "update", "acme", "--allowed-mcp-tool", "files*__read",
                        "--clear", "allowed-mcp-server", "--json")
    assert rc == 0, err
    shown = json.loads(out)
    assert (shown["allowed_mcp_servers"], shown["allowed_mcp_tools"]) == (None, ["files*__read"])


def test_a_bad_mcp_glob_names_its_option(config, capsys):
    rc, _, err = orgs(capsys, config, "create", "acme", "--allowed-mcp-server", "github", "--allowed-mcp-server", "")
    assert rc == 1 and "--allowed-mcp-server: item [1] must not be empty" in err, err
    assert orgs(capsys, config, "show", "acme")[0] == 1
