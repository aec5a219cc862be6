"""Hot reload, the pure half: what a new revision may change while running.

A new file revision is fully validated into a Snapshot first (an invalid one
changes nothing). Fields the running process cannot change in place -- the
listening socket, worker count, the shared client's pool and connect limit,
the drain window, hypercorn's keep-alive and h2c settings, the log format and
tracing setup, the stores opened at start -- keep their running values and
are reported as pending a restart instead of being half-applied. Each says
so where it is declared (``field(..., restart=True)``, ``section(...,
restart=True)`` or ``restart_section``); both the list of such fields and
the keeping of their values are derived from those declarations here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import attrs
from attrs import frozen

from switchyard.config.fields import waits_for_restart, yaml_key
from switchyard.config.schema import Snapshot


def _restart_paths(cls: type, prefix: str = "") -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(dotted YAML path, attribute names from the Snapshot) of every restart-only field under ``cls``."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for f in attrs.fields(cls):
        path = f"{prefix}{yaml_key(f)}"
        if waits_for_restart(f):
            out.append((path, (f.name,)))
        elif attrs.has(type(f.default)):   # a section: its own fields
            out += [(inner, (f.name, *names)) for inner, names in _restart_paths(type(f.default), f"{path}.")]
    return tuple(out)


# Every restart-only field, in declaration order: its YAML path and how to reach it from a Snapshot.
RESTART_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = _restart_paths(Snapshot)


def _value(snapshot: Snapshot, names: tuple[str, ...]) -> Any:
    value: Any = snapshot
    for name in names:
        value = getattr(value, name)
    return value


def _kept(new: Any, running: Any, names: tuple[str, ...]) -> Any:
    """``new`` with the field at ``names`` (relative to it) set to its ``running`` value."""
    head, *rest = names
    value = getattr(running, head) if not rest else _kept(getattr(new, head), getattr(running, head), tuple(rest))
    return attrs.evolve(new, **{head: value})


@frozen
class Applied:
    snapshot: Snapshot                 # what runs now
    pending_restart: tuple[str, ...]   # fields the file changed that wait for a restart


def apply_live(running: Snapshot, new: Snapshot) -> Applied:
    """``new`` with every restart-only field kept at its running value."""
    pending = tuple(path for path, names in RESTART_FIELDS if _value(running, names) != _value(new, names))
    kept = new
    for _, names in RESTART_FIELDS:
        kept = _kept(kept, running, names)
    return Applied(kept, pending)


@frozen
class FileStamp:
    """Cheap change detection: stat first, hash only when the stat moved."""

    mtime_ns: int
    size: int
    inode: int


def stamp(path: Path) -> FileStamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return FileStamp(st.st_mtime_ns, st.st_size, st.st_ino)


def stamp_all(paths: tuple[Path, ...]) -> tuple[tuple[str, FileStamp | None, tuple[str, ...] | None], ...]:
    """One stamp per path; a directory also by its sorted listing, so adding,
    removing or renaming a file in it counts even within one mtime tick."""
    out = []
    for path in paths:
        listing = None
        if path.is_dir():
            try:
                listing = tuple(sorted(p.name for p in path.iterdir()))
            except OSError:
                listing = None
        out.append((str(path), stamp(path), listing))
    return tuple(out)


def content_revision(text: str) -> str:
    """The revision id Snapshots carry: a hash of the file's text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]
