"""ConfigWatcher: notices a changed config file and asks the runtime to reload it.

A polling loop on Trio's clock: a stat every ``interval`` (cheap), and a
reload only when the file's size, mtime or inode moved -- which also catches
editors that save by writing a new file and renaming it over the old one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from config.watch import stamp

if TYPE_CHECKING:
    from actors.runtime import Runtime

POLL_INTERVAL = 1.0


class ConfigWatcher:
    name = "config-watcher"

    def __init__(self, runtime: "Runtime", path: Path, interval: float = POLL_INTERVAL) -> None:
        self.runtime = runtime
        self.path = path
        self.interval = interval

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        last = stamp(self.path)
        self.runtime.reload_status.watcher = "watching"
        task_status.started(self)
        try:
            while True:
                await trio.sleep(self.interval)
                now = stamp(self.path)
                if now != last and now is not None:
                    last = now
                    self.runtime.reload_from_file("watcher")
        finally:
            self.runtime.reload_status.watcher = "stopped"
