"""The annotations are checked: mypy ([tool.mypy] in pyproject.toml) over the source, on every test run.

The layers install as one package, ``switchyard``, from three top-level
folders (``package-dir`` in pyproject.toml), which mypy cannot follow from
the repository itself; so the check runs on a package of links to them,
made in a temporary folder. Its cache stays in the repository's
``.mypy_cache`` between runs (a cold run takes about ten seconds).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_mypy_finds_nothing(tmp_path):
    package = tmp_path / "switchyard"
    package.mkdir()
    for layer in ("actors", "config", "protocol"):
        (package / layer).symlink_to(REPO / layer, target_is_directory=True)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
         "--cache-dir", str(REPO / ".mypy_cache"), "switchyard"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
