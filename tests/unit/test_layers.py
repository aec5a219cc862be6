"""The layers hold and the code is linted: import-linter's contracts and ruff's rules in pyproject.toml, run
on every test run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_import_linter_contracts_are_kept():
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(linter), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_contract_the_layers_need_is_declared():
    """Removing a contract from pyproject.toml fails the run as surely as breaking one."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    kinds = sorted(c["type"] for c in contracts["contracts"])
    assert kinds == ["acyclic_siblings", "forbidden", "forbidden", "layers", "layers"]
    layers = [c["layers"] for c in contracts["contracts"] if c["type"] == "layers"]
    assert ["switchyard.protocol", "switchyard.actors", "switchyard.config"] in layers
    assert ["serving", "admin | doors", "wires | search | mcp | kv", "simulated", "http | stores"] in layers


def test_ruff_finds_nothing():
    """Sorted imports, pyflakes, pycodestyle, bugbear and the async rules ([tool.ruff] in pyproject.toml)."""
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
