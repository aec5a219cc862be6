"""Hot reload, the pure half: what a new revision may change while running.

A new file revision is fully validated into a Snapshot first (an invalid one
changes nothing). Fields the running process cannot change in place -- the
listening socket, worker count, the shared client's pool and connect limit,
the drain window, hypercorn's keep-alive and h2c settings, the log format and tracing setup -- keep their running
values and are reported as pending a restart instead of being half-applied.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

import attrs
from attrs import frozen

from switchyard.config.schema import Snapshot

# field path -> how to read it from a Snapshot
RESTART_FIELDS: dict[str, Callable[[Snapshot], Any]] = {
    "server.bind_address": lambda s: s.server.bind_address,
    "server.workers": lambda s: s.server.workers,
    "server.connection_pool_size": lambda s: s.server.connection_pool_size,
    "server.shutdown_drain_timeout": lambda s: s.server.shutdown_drain_timeout,
    "server.keep_alive_timeout": lambda s: s.server.keep_alive_timeout,     # hypercorn's, set at start
    "server.http2_cleartext": lambda s: s.server.http2_cleartext,
    "server.data_dir": lambda s: s.server.data_dir,     # the ledger's files, opened at start
    "usage": lambda s: s.usage,                         # the ledger's store and batching, opened at start
    "state": lambda s: s.state,     # the limiters' Redis and its fault settings, read when it connects at start
    "timeouts.connection": lambda s: s.timeouts.connection,
    "logging": lambda s: s.logging,
    "tracing": lambda s: s.tracing,
    # the response cache's store object, made at start (the rest of the section applies live)
    "response_cache.store": lambda s: s.response_cache.store,
    "response_cache.max_entries": lambda s: s.response_cache.max_entries,
    "response_cache.max_bytes": lambda s: s.response_cache.max_bytes,
}


@frozen
class Applied:
    snapshot: Snapshot                 # what runs now
    pending_restart: tuple[str, ...]   # fields the file changed that wait for a restart


def apply_live(running: Snapshot, new: Snapshot) -> Applied:
    """``new`` with every restart-only field kept at its running value."""
    pending = tuple(name for name, read in RESTART_FIELDS.items() if read(running) != read(new))
    kept = attrs.evolve(
        new,
        server=attrs.evolve(new.server, bind_address=running.server.bind_address, workers=running.server.workers,
                            connection_pool_size=running.server.connection_pool_size,
                            shutdown_drain_timeout=running.server.shutdown_drain_timeout,
                            keep_alive_timeout=running.server.keep_alive_timeout,
                            http2_cleartext=running.server.http2_cleartext, data_dir=running.server.data_dir),
        timeouts=attrs.evolve(new.timeouts, connection=running.timeouts.connection),
        logging=running.logging,
        tracing=running.tracing,
        usage=running.usage,
        state=running.state,
        response_cache=attrs.evolve(new.response_cache, store=running.response_cache.store,
                                    max_entries=running.response_cache.max_entries,
                                    max_bytes=running.response_cache.max_bytes),
    )
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
