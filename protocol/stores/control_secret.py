"""The server secret that keys the digests of database keys' secrets (``actors/control/secrets.py``).

``SWITCHYARD_CONTROL_SECRET`` from the environment, when set: what a fleet
on one PostgreSQL must set, alike on every instance, since a digest made
with one secret is unknown to an instance with another. Without it, on the
embedded default (SQLite), the secret is made once and kept in
``control-secret`` under ``server.data_dir`` (mode 0600, beside the database
but not in it), and every worker of the machine reads the same file. On
PostgreSQL without it, and with ``usage.ledger: memory``, there are no
database keys; the reason is what the admin API answers when asked for one.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Mapping

from switchyard.config.usage import UsageConfig

ENV = "SWITCHYARD_CONTROL_SECRET"
FILE = "control-secret"
MIN_LENGTH = 32   # characters of the environment's secret


def control_secret(usage: UsageConfig, data_dir: Path, environ: Mapping[str, str] = os.environ
                   ) -> tuple[bytes | None, str | None]:
    """(the secret, None), or (None, why there is none)."""
    ledger = usage.ledger
    if ledger == "memory":
        return None, "usage.ledger is memory: there is no database to keep keys in"
    value = environ.get(ENV)
    if value:
        if len(value) < MIN_LENGTH:
            return None, f"{ENV} must be at least {MIN_LENGTH} characters (use a long random value)"
        return value.encode(), None
    if ledger.startswith(("postgresql://", "postgres://")):
        return None, (f"set {ENV} (the same long random value on every instance sharing the PostgreSQL ledger) "
                      f"to keep keys in it")
    return _kept(Path(data_dir) / FILE), None


def _kept(path: Path) -> bytes:
    """The file's secret, made first if there is none (atomically: a worker never reads half of one)."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        try:
            os.link(draft, path)   # fails if another worker made it first: theirs is the secret
        except FileExistsError:
            pass
    finally:
        draft.unlink(missing_ok=True)
    return _read(path)


def _read(path: Path) -> bytes:
    text = path.read_text().strip()
    if not text:
        raise ValueError(f"{path} is empty: delete it to make a new control secret (database keys made with "
                         f"the old one stop working)")
    return text.encode()
