"""The directory of large batch files (``batches.directory``): written whole or not at all, read, deleted.

A file past ``batches.inline_bytes`` lives here, named by its id, while its
row in the database holds the name. A write goes to a temporary name, is
flushed to disk and renamed, so a reader (another worker, another instance
on the same shared mount) sees the whole file or none. Every failure of the
directory is a ``StoreUnavailable`` naming it: the client gets a 503, never
half a file. The methods block (callers run them in worker threads).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.config.batches import BatchesConfig

FILES_DIR = "files"   # under server.data_dir, when batches.directory is empty


def files_directory(batches: BatchesConfig, data_dir: Path) -> Path:
    """``batches.directory`` (a relative one under ``server.data_dir``), else ``<data_dir>/files``."""
    return Path(data_dir) / Path(batches.directory or FILES_DIR).expanduser()


class FileDirectory:
    def __init__(self, path: Path) -> None:
        self.path = path   # made when the first file is written

    def write(self, name: str, content: bytes) -> str:
        """``content`` as ``name``, whole or not at all; the name."""
        temp = self.path / f".{name}.{secrets.token_hex(4)}.part"
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            with open(temp, "wb") as out:
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path / name)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise self._failed("write", name, exc) from None
        return name

    def read(self, name: str) -> bytes:
        try:
            return (self.path / name).read_bytes()
        except OSError as exc:
            raise self._failed("read", name, exc) from None

    def delete(self, name: str) -> None:
        try:
            (self.path / name).unlink(missing_ok=True)
        except OSError as exc:
            raise self._failed("delete", name, exc) from None

    def _failed(self, what: str, name: str, exc: OSError) -> StoreUnavailable:
        return StoreUnavailable(f"batches.directory {self.path}: cannot {what} {name}: {exc.strerror or exc}")
