"""``switchyard admins`` in-process on a SQLite data dir: the first administrator made without the API, each
command, and the exit statuses (1 refused, 2 the store unavailable)."""

from __future__ import annotations

import getpass
import json

import pytest

from switchyard.actors.control import secrets
from switchyard.config.usage import UsageConfig
from switchyard.protocol.serving.cli import main
from switchyard.protocol.stores.control import open_control_store


@pytest.fixture
def config(tmp_path) -> str:
    path = tmp_path / "switchyard.yaml"
    path.write_text(f"server: {{data_dir: '{tmp_path / 'data'}'}}\n"
                    "backends:\n  - {name: a, type: simulated, models: [demo]}\n")
    return str(path)


def admins(capsys, config: str, command: str, *options: str) -> tuple[int, str, str]:
    rc = main(["admins", command, "--config", config, *options])
    out, err = capsys.readouterr()
    return rc, out, err


def stored(tmp_path) -> dict:
    store = open_control_store(UsageConfig(), tmp_path / "data")
    store.open()
    try:
        return {a.id: a for a in store.load_admins()}
    finally:
        store.close()


def test_create_prints_the_token_once_and_the_account_is_audited_as_the_cli_user(config, tmp_path, capsys):
    rc, out, _ = admins(capsys, config, "create", "root", "--role", "admin", "--json")
    made = json.loads(out)
    assert rc == 0 and secrets.check(made["token"]) is secrets.Kind.ADMIN
    record = stored(tmp_path)["root"]
    assert (record.role, record.prefix, record.created_by) == ("admin", made["token"][:12],
                                                               f"cli:{getpass.getuser()}")
    rc, out, _ = admins(capsys, config, "list")
    assert rc == 0 and "root" in out and made["token"] not in out


def test_rotate_disable_update_and_delete_change_the_stored_account(config, tmp_path, capsys):
    admins(capsys, config, "create", "root", "--role", "admin")
    admins(capsys, config, "create", "ops", "--role", "viewer")
    old = stored(tmp_path)["ops"].digest
    assert admins(capsys, config, "rotate", "ops")[0] == 0 and stored(tmp_path)["ops"].digest != old
    assert admins(capsys, config, "update", "ops", "--role", "operator")[0] == 0
    assert admins(capsys, config, "disable", "ops")[0] == 0
    assert (stored(tmp_path)["ops"].role, stored(tmp_path)["ops"].disabled_at is not None) == ("operator", True)
    assert admins(capsys, config, "delete", "ops")[0] == 0 and "ops" not in stored(tmp_path)


def test_the_last_admin_account_is_kept_while_admin_token_is_unset(config, capsys):
    admins(capsys, config, "create", "root", "--role", "admin")
    rc, _, err = admins(capsys, config, "delete", "root")
    assert rc == 1 and "last enabled one of role 'admin'" in err
    rc, _, err = admins(capsys, config, "rotate", "nobody")
    assert rc == 1 and "No administrator with id 'nobody'" in err


def test_a_bad_id_is_refused_naming_it_and_a_memory_ledger_is_unavailable(config, tmp_path, capsys):
    rc, _, err = admins(capsys, config, "create", "x y", "--role", "viewer")
    assert rc == 1 and "ID:" in err
    memory = tmp_path / "memory.yaml"
    memory.write_text("usage: {ledger: memory}\nbackends:\n  - {name: a, type: simulated, models: [demo]}\n")
    assert admins(capsys, str(memory), "create", "root", "--role", "admin")[0] == 2
