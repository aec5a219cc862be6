"""``switchyard keys`` in-process on a SQLite data dir: each command, the options read by the API's body rules,
and the exit statuses (1 refused, 2 the store unavailable)."""

from __future__ import annotations

import getpass
import json
import time
from pathlib import Path

import pytest

from switchyard.actors.control import secrets
from switchyard.config.usage import UsageConfig
from switchyard.protocol.serving.cli import main
from switchyard.protocol.stores.control import open_control_store
from switchyard.protocol.stores.control_secret import FILE

CONFIG_KEY = "sk-config-0123456789abcdef"


@pytest.fixture
def config(tmp_path) -> str:
    path = tmp_path / "switchyard.yaml"
    path.write_text(f"server: {{data_dir: '{tmp_path / 'data'}'}}\n"
                    "backends:\n  - {name: a, type: simulated, models: [demo]}\n"
                    f"api_keys:\n  - {{id: team-config, key: {CONFIG_KEY}}}\n")
    return str(path)


def keys(capsys, config: str, command: str, *options: str) -> tuple[int, str, str]:
    rc = main(["keys", command, "--config", config, *options])
    out, err = capsys.readouterr()
    return rc, out, err


def made(capsys, config: str, *options: str) -> dict:
    rc, out, err = keys(capsys, config, "create", "--json", *options)
    assert rc == 0, err
    return json.loads(out)


def stored(data: Path) -> dict:
    """The records in the store, by id."""
    store = open_control_store(UsageConfig(), data)
    store.open()
    try:
        return {r.id: r for r in store.load()[1]}
    finally:
        store.close()


def server_secret(data: Path) -> bytes:
    return (data / FILE).read_text().strip().encode()


def test_create_prints_a_secret_of_the_shape_once_and_stores_its_digest(config, tmp_path, capsys):
    rc, out, err = keys(capsys, config, "create", "--id", "svc", "--label", "team=search")
    secret = next(line.split()[1] for line in out.splitlines() if line.startswith("secret "))
    assert rc == 0 and secrets.check(secret) is secrets.Kind.KEY
    assert "the secret is shown this once" in err
    record = stored(tmp_path / "data")["svc"]
    assert record.digest == secrets.digest(secret.encode(), server_secret(tmp_path / "data"))
    assert (record.prefix, record.created_by, dict(record.metadata)) == (
        secret[:12], f"cli:{getpass.getuser()}", {"team": "search"})
    rc, out, _ = keys(capsys, config, "show", "svc")
    assert rc == 0 and secret not in out and secret[:12] in out


def test_list_shows_config_keys_then_database_keys_by_id(config, capsys):
    made(capsys, config, "--id", "k-b")
    made(capsys, config, "--id", "k-a", "--organization-id", "acme")
    rc, out, _ = keys(capsys, config, "list")
    rows = [line.split()[:3] for line in out.splitlines()]
    assert rc == 0 and rows == [["id", "source", "status"], ["team-config", "config", "active"],
                                ["k-a", "database", "active"], ["k-b", "database", "active"]]
    rc, out, _ = keys(capsys, config, "list", "--json", "--organization-id", "acme")
    listed = json.loads(out)
    assert rc == 0 and [k["id"] for k in listed["keys"]] == ["k-a"] and listed["next"] is None


def test_show_prints_one_key_as_lines_or_as_json(config, capsys):
    made(capsys, config, "--id", "svc", "--rate-limit", "requests_per_minute=60,tokens_per_minute=1000",
         "--budget", "limit_usd=50,period=month", "--allowed-model", "demo", "--allowed-model", "gpt-*")
    rc, out, _ = keys(capsys, config, "show", "svc")
    lines = dict(line.split(None, 1) for line in out.splitlines())
    assert rc == 0 and lines["rate_limit"] == "requests_per_minute=60,tokens_per_minute=1000"
    assert (lines["budget"], lines["allowed_models"], lines["status"]) == (
        "limit_usd=50.0,period=month", "demo, gpt-*", "active")
    rc, out, _ = keys(capsys, config, "show", "svc", "--json")
    page = json.loads(out)
    assert page["settings"]["rate_limit"] == {"requests_per_second": None, "requests_per_minute": 60,
                                              "tokens_per_minute": 1000, "max_concurrent": None}
    assert page["settings"]["allowed_models"] == ["demo", "gpt-*"] and "secret" not in page


def test_update_changes_the_fields_given_and_clear_sets_one_to_none(config, capsys):
    made(capsys, config, "--id", "svc", "--tier", "basic", "--rate-limit", "requests_per_minute=60",
         "--label", "team=search")
    rc, out, _ = keys(capsys, config, "update", "svc", "--tier", "gold", "--clear", "rate-limit", "--json")
    settings = json.loads(out)["settings"]
    assert rc == 0 and (settings["tier"], settings["rate_limit"]) == ("gold", None)
    assert json.loads(out)["metadata"] == {"team": "search"}   # not given: unchanged


def test_cache_false_turns_the_response_cache_off_for_the_key_and_clear_gives_it_back(config, capsys):
    made(capsys, config, "--id", "svc", "--cache", "false")
    _, out, _ = keys(capsys, config, "show", "svc", "--json")
    assert json.loads(out)["settings"]["cache"] is False
    rc, out, _ = keys(capsys, config, "update", "svc", "--clear", "cache", "--json")
    assert rc == 0 and json.loads(out)["settings"]["cache"] is None


def test_rotate_with_a_grace_keeps_the_old_secret_working_for_it(config, tmp_path, capsys):
    old = made(capsys, config, "--id", "svc")["secret"]
    before = time.time()
    rc, out, _ = keys(capsys, config, "rotate", "svc", "--grace", "300", "--json")
    rotated = json.loads(out)
    assert rc == 0 and rotated["secret"] != old and rotated["previous_secret"]["prefix"] == old[:12]
    record = stored(tmp_path / "data")["svc"]
    assert record.previous is not None
    assert record.previous.digest == secrets.digest(old.encode(), server_secret(tmp_path / "data"))
    assert before + 300 <= record.previous.valid_until <= time.time() + 300


def test_revoke_refuses_the_key_from_now_on_and_keeps_it_listed(config, tmp_path, capsys):
    made(capsys, config, "--id", "svc")
    rc, out, _ = keys(capsys, config, "revoke", "svc", "--json")
    assert rc == 0 and json.loads(out)["status"] == "revoked"
    assert stored(tmp_path / "data")["svc"].revoked_at is not None


def test_delete_forgets_the_key(config, tmp_path, capsys):
    made(capsys, config, "--id", "svc")
    rc, out, _ = keys(capsys, config, "delete", "svc")
    assert rc == 0 and out == "deleted key 'svc'\n"
    assert "svc" not in stored(tmp_path / "data")


def test_a_bad_option_value_is_refused_naming_its_option_before_the_store_is_touched(config, tmp_path, capsys):
    rc, out, err = keys(capsys, config, "create", "--rate-limit", "requests_per_minute=0",
                        "--label", "team=ok", "--label", "bad name=x")
    assert (rc, out) == (1, "")
    assert err.splitlines() == [
        "switchyard keys create: --rate-limit requests_per_minute: must be at least 1, got 0",
        "switchyard keys create: --label: has the label name 'bad name': names must be 1-64 letters, digits, "
        "'.', '_', ':' or '-'"]
    assert not (tmp_path / "data").exists()


def test_an_unknown_id_is_refused_with_1(config, capsys):
    made(capsys, config)   # the store exists
    for command in ("show", "update", "rotate", "revoke", "delete"):
        rc, _, err = keys(capsys, config, command, "nope", *(["--tier", "x"] if command == "update" else []))
        assert (rc, err) == (1, f"switchyard keys {command}: No API key with id 'nope'\n")


def test_a_config_keys_id_is_refused_as_the_api_refuses_it(config, capsys):
    rc, _, err = keys(capsys, config, "create", "--id", "team-config")
    assert rc == 1 and "The id 'team-config' is a key of the config's api_keys; choose another" in err
    rc, _, err = keys(capsys, config, "revoke", "team-config")
    assert rc == 1 and "declared in the config's api_keys: change it there" in err


def test_a_store_that_cannot_be_used_exits_2_saying_why(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    path = tmp_path / "memory.yaml"
    path.write_text("usage: {ledger: memory}\nbackends:\n  - {name: a, type: simulated, models: [demo]}\n")
    rc, _, err = keys(capsys, str(path), "create")
    assert rc == 2 and "usage.ledger is memory: there is no database to keep keys in" in err
    path.write_text(f"usage: {{ledger: 'sqlite://{tmp_path / 'file' / 'usage.db'}'}}\n"   # under a file
                    f"server: {{data_dir: '{tmp_path / 'data'}'}}\n"
                    "backends:\n  - {name: a, type: simulated, models: [demo]}\n")
    rc, _, err = keys(capsys, str(path), "create")
    assert rc == 2 and err.startswith("switchyard keys create: the key store (")


def test_reading_creates_nothing_on_a_new_machine(config, tmp_path, capsys):
    rc, out, err = keys(capsys, config, "list")
    assert rc == 0 and [line.split()[0] for line in out.splitlines()] == ["id", "team-config"]
    assert "no database keys: no ledger file at" in err and not (tmp_path / "data").exists()


def test_a_command_line_it_cannot_read_exits_1_not_2(config, capsys):
    rc = None
    with pytest.raises(SystemExit) as exited:
        rc = main(["keys", "create", "--config", config, "--colour", "red"])
    assert rc is None and exited.value.code == 1
    assert "unrecognized arguments: --colour red" in capsys.readouterr().err


def test_a_backend_the_config_does_not_have_is_refused_naming_which_option(config, capsys):
    rc, _, err = keys(capsys, config, "create", "--allowed-backend", "a", "--allowed-backend", "b")
    assert (rc, err) == (1, "switchyard keys create: --allowed-backend #2: no backend is named 'b'\n")


def test_a_change_from_the_command_line_is_audited_as_its_user(config, tmp_path, capsys):
    made(capsys, config, "--id", "svc")
    assert keys(capsys, config, "revoke", "svc")[0] == 0
    store = open_control_store(UsageConfig(), tmp_path / "data")
    store.open()
    try:
        entries = store.audit({}, 10)
    finally:
        store.close()
    assert [(e.action, e.actor, e.address) for e in entries] == [
        ("key.revoke", f"cli:{getpass.getuser()}", None), ("key.create", f"cli:{getpass.getuser()}", None)]
