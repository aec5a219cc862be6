"""The install layout: one import package, switchyard, with every sub-package of the three layers in it."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("actors", "config", "protocol")


def setuptools_table() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_layer_installs_under_switchyard_and_nothing_else_at_the_top():
    table = setuptools_table()
    assert table["package-dir"] == {f"switchyard.{layer}": layer for layer in LAYERS}
    assert all(name.startswith("switchyard.") for name in table["packages"])


def test_every_sub_package_in_the_source_tree_is_installed():
    found = {"switchyard." + str(init.parent.relative_to(REPO)).replace("/", ".")
             for layer in LAYERS for init in (REPO / layer).rglob("__init__.py")}
    assert found == set(setuptools_table()["packages"])
