"""``switchyard usage report`` over a real SQLite ledger file: formats, filters, and the exits for bad options."""

import csv
import io
import json
import subprocess
import sys
from typing import Any

import pytest

from switchyard.actors.ledger.record import LedgerRecord
from switchyard.protocol.serving.cli import main
from switchyard.protocol.stores.sqlite import SqliteStore

DEC_1 = 1796083200.0   # 2026-12-01T00:00:00Z
SPAN = ["--from", "2026-12-01", "--to", "2026-12-03"]


def rec(request_id: str, at: float, **kw: Any) -> LedgerRecord:
    base: dict[str, Any] = dict(request_id=request_id, time=at, key_id="team-a", organization_id="acme",
                                endpoint="chat", model="demo", served_model="demo", backend="a", attempts=1,
                                status=200, error_code=None, input_tokens=10, output_tokens=5, cost=0.25)
    return LedgerRecord(**{**base, **kw})


@pytest.fixture
def config(tmp_path) -> str:
    """A config whose ledger is a SQLite file holding a few records."""
    db = tmp_path / "ledger" / "usage.db"
    store = SqliteStore(db)
    store.open()
    store.write([rec("r1", DEC_1 + 60), rec("r2", DEC_1 + 120, key_id="team-b", cost=None, status=500),
                 rec("r3", DEC_1 + 86400, key_id="=1+1"),
                 rec("r1", DEC_1 + 30, purpose="classifier", key_id=None, model="tiny", input_tokens=40),
                 rec("r9", DEC_1 + 3 * 86400)])   # outside --to
    store.close()
    path = tmp_path / "switchyard.yaml"
    path.write_text(f"usage: {{ledger: 'sqlite://{db}'}}\n"
                    "backends:\n  - {name: a, type: simulated, models: [demo]}\n")
    return str(path)


def report(config: str, *options: str) -> int:
    return main(["usage", "report", "--config", config, *options])


def test_the_table_has_a_row_per_group_and_a_total(config, capsys):
    assert report(config, *SPAN, "--group-by", "key") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["key_id", "requests", "errors", "input_tokens", "output_tokens", "cost",
                                "cache_hits", "saved_cost"]
    assert [line.split() for line in lines[1:]] == [
        ["=1+1", "1", "0", "10", "5", "0.250000", "0", "-"],
        ["team-a", "1", "0", "10", "5", "0.250000", "0", "-"],
        ["team-b", "1", "1", "10", "5", "-", "0", "-"],
        ["(total)", "3", "1", "30", "15", "0.500000", "0", "-"]]


def test_json_is_what_the_admin_api_answers(config, capsys):
    assert report(config, *SPAN, "--group-by", "day", "--format", "json") == 0
    assert json.loads(capsys.readouterr().out) == {"groups": [
        {"day": "2026-12-01", "requests": 2, "errors": 1, "input_tokens": 20, "output_tokens": 10, "cost": 0.25,
         "cache_hits": 0, "saved_cost": None},
        {"day": "2026-12-02", "requests": 1, "errors": 0, "input_tokens": 10, "output_tokens": 5, "cost": 0.25,
         "cache_hits": 0, "saved_cost": None}]}


def test_csv_has_a_header_and_defuses_formulas(config, capsys):
    assert report(config, *SPAN, "--group-by", "key", "--format", "csv") == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["key_id", "requests", "errors", "input_tokens", "output_tokens", "cost", "cache_hits",
                       "saved_cost"]
    assert rows[1] == ["'=1+1", "1", "0", "10", "5", "0.25", "0", ""]
    assert rows[3] == ["team-b", "1", "1", "10", "5", "", "0", ""]


def test_the_filters_and_purpose_narrow_the_report(config, capsys):
    assert report(config, *SPAN, "--group-by", "model", "--purpose", "classifier", "--format", "json") == 0
    assert [g["model"] for g in json.loads(capsys.readouterr().out)["groups"]] == ["tiny"]
    assert report(config, *SPAN, "--group-by", "model", "--key", "team-b", "--org", "acme", "--model", "demo",
                  "--backend", "a", "--format", "json") == 0
    assert [g["requests"] for g in json.loads(capsys.readouterr().out)["groups"]] == [1]


def test_the_report_groups_by_endpoint_and_filters_by_it(config, tmp_path, capsys):
    store = SqliteStore(tmp_path / "ledger" / "usage.db")   # the config's ledger
    store.open()
    store.write([rec("r4", DEC_1 + 180, endpoint="embeddings", output_tokens=0, cost=0.5)])
    store.close()
    assert report(config, *SPAN, "--group-by", "endpoint") == 0
    assert [line.split() for line in capsys.readouterr().out.splitlines()] == [
        ["endpoint", "requests", "errors", "input_tokens", "output_tokens", "cost", "cache_hits", "saved_cost"],
        ["chat", "3", "1", "30", "15", "0.500000", "0", "-"],
        ["embeddings", "1", "0", "10", "0", "0.500000", "0", "-"],
        ["(total)", "4", "1", "40", "15", "1.000000", "0", "-"]]
    assert report(config, *SPAN, "--group-by", "key", "--endpoint", "embeddings", "--format", "json") == 0
    assert [(g["key_id"], g["requests"]) for g in json.loads(capsys.readouterr().out)["groups"]] == [("team-a", 1)]


def test_a_bad_endpoint_exits_2_naming_the_option(config, capsys):
    assert report(config, *SPAN, "--group-by", "day", "--endpoint", "chat-completions") == 2
    err = capsys.readouterr().err
    assert err.startswith("switchyard usage report: --endpoint must be one of chat, completions, ")
    assert "got 'chat-completions'" in err


def test_a_bad_group_by_exits_2_naming_the_option(config, capsys):
    assert report(config, *SPAN, "--group-by", "week") == 2
    assert capsys.readouterr().err.strip() == ("switchyard usage report: --group-by must be one of key, org, model, "
                                               "backend, endpoint, day, hour, got 'week'")


def test_a_bad_time_exits_2_naming_the_option(config, capsys):
    assert report(config, "--from", "2026-12-01T10:00", "--to", "2026-12-02", "--group-by", "day") == 2
    assert capsys.readouterr().err.startswith("switchyard usage report: --from needs its UTC offset")


def test_a_bad_purpose_exits_2_naming_the_option(config, capsys):
    assert report(config, *SPAN, "--group-by", "day", "--purpose", "everything") == 2
    assert "--purpose must be one of client, batch, classifier, web_search, mcp, cache, guardrail, all" in \
        capsys.readouterr().err


def test_a_missing_required_option_exits_2(config, capsys):
    with pytest.raises(SystemExit) as exited:
        report(config, "--to", "2026-12-02", "--group-by", "day")
    assert exited.value.code == 2 and "--from" in capsys.readouterr().err


def test_an_invalid_config_exits_1_with_its_errors(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("usage: {ledger: mysql}\nbackends: []\n")
    assert report(str(bad), *SPAN, "--group-by", "day") == 1
    assert "usage.ledger" in capsys.readouterr().err


def test_a_ledger_that_cannot_be_opened_exits_1_saying_why(tmp_path, capsys):
    not_a_db = tmp_path / "usage.db"
    not_a_db.write_text("this is not a database")
    path = tmp_path / "switchyard.yaml"
    path.write_text(f"usage: {{ledger: 'sqlite://{not_a_db}'}}\nbackends:\n  - {{name: a, type: simulated, "
                    "models: [demo]}\n")
    assert report(str(path), *SPAN, "--group-by", "day") == 1
    assert capsys.readouterr().err.startswith("switchyard usage report: the usage ledger cannot be read: ")


def test_the_command_runs_as_a_process(config):
    done = subprocess.run([sys.executable, "-m", "switchyard.protocol.serving.cli", "usage", "report",
                           "--config", config, *SPAN, "--group-by", "backend", "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["groups"][0]["backend"] == "a"


def test_a_missing_ledger_file_is_an_error_not_an_empty_report(tmp_path, capsys):
    path = tmp_path / "switchyard.yaml"
    path.write_text(f"server: {{data_dir: '{tmp_path / 'nowhere'}'}}\n"
                    "backends:\n  - {name: a, type: simulated, models: [demo]}\n")
    assert report(str(path), *SPAN, "--group-by", "day") == 1
    assert f"no ledger file at {tmp_path / 'nowhere' / 'usage.db'}" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()
