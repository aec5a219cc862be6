"""ConfigWatcher: notices a changed config file and asks the runtime to reload it.

A polling loop on Trio's clock: a stat every ``interval`` (cheap), and a
reload only when the file's size, mtime or inode moved -- which also catches
editors that save by writing a new file and renaming it over the old one.
The files the config references count too: the model metadata files and the
drop-in directories' listings (``Snapshot.models.watch``, re-read after each
reload, so a newly referenced file is watched from then on).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import trio

from switchyard.config.watch import stamp, stamp_all

if TYPE_CHECKING:
    from switchyard.config.schema import Snapshot

POLL_INTERVAL = 1.0


class Reloadable(Protocol):
    """What the watcher needs of the Runtime it reloads."""

    snapshot: "Snapshot"
    reload_status: Any   # its ``watcher`` field says whether the file is watched

    def reload_from_file(self, trigger: str) -> dict[str, Any]: ...


class ConfigWatcher:
    name = "config-watcher"

    def __init__(self, runtime: Reloadable, path: Path, interval: float = POLL_INTERVAL) -> None:
        self.runtime = runtime
        self.path = path
        self.interval = interval

    def paths(self) -> tuple[Path, ...]:
        """The config file first, then what the running Snapshot read besides it."""
        return (self.path, *(Path(p) for p in self.runtime.snapshot.models.watch))

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        last = stamp_all(self.paths())
        self.runtime.reload_status.watcher = "watching"
        task_status.started(self)
        try:
            while True:
                await trio.sleep(self.interval)
                now = stamp_all(self.paths())
                if now != last and stamp(self.path) is not None:   # not while the file is mid-rename
                    self.runtime.reload_from_file("watcher")
                    # A reload may reference other files: stamp the new set, so the
                    # change of set alone does not count as a change next time.
                    now = stamp_all(self.paths()) if self.paths() != tuple(Path(p) for p, _, _ in now) else now
                    last = now
        finally:
            self.runtime.reload_status.watcher = "stopped"
