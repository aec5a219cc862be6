"""docs/configuration.md against the schema: what the reference says of a key is what the code declares.

The reference is written by hand, for people; these tests hold it to the
declarations in config/ (``attrs.fields`` and their metadata): every key it
gives a heading exists, the default it states is the declared one, and what
waits for a restart is what ``field(..., restart=True)`` says.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any

import attrs
import pytest

from switchyard.config.fields import waits_for_restart, yaml_key
from switchyard.config.schema import BackendConfig, Snapshot
from switchyard.config.watch import RESTART_FIELDS

REFERENCE = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
# A key's heading and its body, up to the next heading.
HEADINGS = re.findall(r"^####? `([a-z_\[\].]+)`\n(.*?)(?=^##)", REFERENCE, re.S | re.M)
DEFAULT_ROW = re.compile(r"^\| Default \| `([^`]*)`", re.M)
RESTART_ROW = "| Reload | a change waits for a restart"
LISTS = {"backends": BackendConfig}   # a list of mappings: `backends[].key`
# YAML nesting the schema flattens (its loader reads it): the path the reference writes, the schema's.
NESTING = {"timeouts.request.": "timeouts.", "timeouts.limits.": "timeouts."}


def declared(path: str) -> tuple[attrs.Attribute, bool] | None:  # type: ignore[type-arg]
    """The field a dotted reference path names, and whether it (or a section above it) waits for a restart."""
    for written, schema in NESTING.items():
        path = schema.rstrip(".") if path == written.rstrip(".") else path.replace(written, schema)
    cls: Any = Snapshot
    found, restart = None, False
    for part in path.split("."):
        name = part.removesuffix("[]")
        if cls is None or not attrs.has(cls):
            return None
        fields = {yaml_key(f): f for f in attrs.fields(cls)}
        if name not in fields:
            return None
        found = fields[name]
        restart = restart or waits_for_restart(found)
        default = found.default
        cls = LISTS.get(name) or (type(default) if attrs.has(type(default)) else
                                  found.metadata.get("switchyard.config.section"))
    return (found, restart) if found is not None else None


def renderings(value: Any) -> set[str]:
    """The ways the reference writes a declared default: durations in s/m/h, sizes in KiB/MiB/GiB."""
    if value is attrs.NOTHING:   # required, or read by a loader of its own: the text says what applies
        return set()
    if isinstance(value, Enum):
        return {str(value.value)}
    if isinstance(value, bool):   # a switch may be written as a word (`replay: enabled`)
        return {"true", "enabled"} if value else {"false", "disabled"}
    if isinstance(value, str):
        return {value, f'"{value}"'}
    if value == ():
        return {"[]"}
    if isinstance(value, (int, float)):
        out = {f"{value:g}", f"{value:g}s", repr(value)}
        if 0 < value < 1:
            out.add(f"{value * 1000:g}ms")
        for unit, size in (("m", 60), ("h", 3600), ("d", 86400)):
            if value and value % size == 0:
                out.add(f"{value / size:g}{unit}")
        for unit, size in (("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3)):
            if isinstance(value, int) and value and value % size == 0:
                out.add(f"{value // size}{unit}")
        return out
    return set()


KEYS = [(path, body) for path, body in HEADINGS if "." in path]


@pytest.mark.parametrize(("path", "body"), KEYS, ids=[p for p, _ in KEYS])
def test_every_key_the_reference_gives_a_heading_is_a_key_of_the_schema(path, body):
    assert declared(path) is not None, f"docs/configuration.md heads `{path}`, which the schema does not declare"


@pytest.mark.parametrize(("path", "body"), KEYS, ids=[p for p, _ in KEYS])
def test_the_default_the_reference_states_is_the_declared_one(path, body):
    found, stated = declared(path), DEFAULT_ROW.search(body)
    if found is None or stated is None:
        return
    accepted = renderings(found[0].default)
    if accepted:   # a scalar default (a section, a list or a prose default is the text's to explain)
        assert stated.group(1) in accepted, f"`{path}`: the reference says {stated.group(1)!r}, the schema " \
                                            f"{found[0].default!r}"


@pytest.mark.parametrize(("path", "body"), KEYS, ids=[p for p, _ in KEYS])
def test_a_key_that_waits_for_a_restart_says_so_and_no_other(path, body):
    found = declared(path)
    if found is not None:
        assert (RESTART_ROW in body) == found[1], f"`{path}`: restart-only is {found[1]} in the schema"


def test_the_list_of_what_waits_for_a_restart_is_the_declared_one():
    section = REFERENCE.split("## What reloads live", 1)[1].split("\nPrompt files", 1)[0]
    listed = set()
    for link in re.findall(r"\[([^\]]*`[^\]]*)\]\(", section):   # each link's text, in order
        first = ""
        for name in re.findall(r"`([^`]+)`", link):
            if name.startswith("."):   # `response_cache.store`, `.max_entries`: the section is the link's first
                name = first.rsplit(".", 1)[0] + name
            first = first or name
            listed.add(name)
    assert listed == {path for path, _ in RESTART_FIELDS}


# Fields the loader computes rather than reads: no YAML key of their own, nothing for the docs to list.
DERIVED = {
    "backends[].model_metadata", "backends[].model_aliases", "backends[].upstream_ids",   # from model_configs
    "global_prompts.base_dir",   # the config file's directory
    "models.watch",              # the metadata files a reload watches
}
DOCS = "".join(p.read_text(encoding="utf-8") for p in (Path(__file__).resolve().parents[2] / "docs").glob("*.md"))


def schema_keys(cls: Any, prefix: str = "", seen: frozenset = frozenset()) -> list[tuple[str, str]]:
    """(path, YAML key) of every key the schema reads, sections walked (a list of mappings as `name[]`)."""
    out = []
    for f in attrs.fields(cls):
        if not f.init or f.metadata.get("internal"):
            continue
        key = yaml_key(f)
        inner = LISTS.get(key) if not prefix else None
        path = f"{prefix}{key}{'[]' if inner else ''}"
        out.append((path, key))
        inner = inner or (type(f.default) if attrs.has(type(f.default)) else
                          f.metadata.get("switchyard.config.section"))
        if inner is not None and attrs.has(inner) and inner not in seen:
            out += schema_keys(inner, f"{path}.", seen | {inner})
    return out


def test_every_key_the_schema_reads_is_documented():
    undocumented = [path for path, key in schema_keys(Snapshot) if path not in DERIVED and
                    not any(form in DOCS for form in (f"`{key}`", f"`{path}`", f"{key}:"))]
    assert undocumented == []
