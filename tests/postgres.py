"""A real PostgreSQL for the tests: Debian's server in a temporary directory on a free loopback port.

Bind the fixtures in the test module that needs them (nothing here is
registered globally; an assignment, not an import, so the tests' parameters
of the same names are no redefinition to the linter)::

    from tests import postgres

    pg_server, pg_url = postgres.pg_server, postgres.pg_url

``pg_server`` is one server for the whole session (started once however many
modules import it); ``pg_url`` is a fresh database for each test, copied from
an empty template. ``PgServer.stop()`` and ``.start()`` take the server away
and bring it back within a test; the next test gets it running again.

PostgreSQL refuses to run as root: as root, initdb and pg_ctl run as the
``postgres`` system user (the Debian package creates it) through runuser.
Without the server's binaries the tests fail (never skip): ``.ci/run``
installs the ``postgresql`` package.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import psycopg
import pytest

from tests.servers import Shared, free_port

BINARIES = "/usr/lib/postgresql/*/bin"
TEMPLATE = "switchyard_template"
TIMEOUT = 60   # seconds any one pg_ctl/initdb may take


def pg_bin() -> Path:
    """The highest installed version's bin directory, or a failed test saying how to get one."""
    found = [Path(d) for d in glob.glob(BINARIES) if (Path(d) / "pg_ctl").exists() and (Path(d) / "initdb").exists()]
    if not found:
        pytest.fail(f"PostgreSQL's server binaries (initdb, pg_ctl) are not under {BINARIES}: these tests need a real "
                    f"server; .ci/run installs it (apt-get install postgresql), or install the Debian package "
                    f"`postgresql` by hand", pytrace=False)
    return max(found, key=lambda d: [int(n) for n in re.findall(r"\d+", d.parent.name)] or [0])


class PgServer:
    """One PostgreSQL cluster: superuser ``postgres``, trust auth, 127.0.0.1 only, fsync off."""

    def __init__(self) -> None:
        self.bin = pg_bin()
        self.host = "127.0.0.1"
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="switchyard-pg-"))   # under /tmp: the postgres user can reach it
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                pytest.fail("running as root, PostgreSQL needs runuser to start as the postgres user", pytrace=False)
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.root, "postgres", "postgres")
        self.running = False
        self._names = itertools.count(1)

    def _run(self, *args: str) -> None:
        cmd = [*self.as_user, *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=self.root)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n{log}")

    def init(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--locale=C", "--no-sync")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"\nport = {self.port}\nlisten_addresses = '{self.host}'\n"
                       f"unix_socket_directories = '{self.root}'\n"
                       "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                       # a zone 12:45 from UTC: a query that leans on the session's time zone shows at once
                       "timezone = 'Pacific/Chatham'\n")
        self.start()
        with self.connect() as conn:
            conn.execute(f"CREATE DATABASE {TEMPLATE} IS_TEMPLATE true")

    def start(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(TIMEOUT),
                  "start")
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """``fast``: clients are disconnected and the server shuts down cleanly; ``immediate``: at once."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", str(TIMEOUT), "-m", mode, "stop")
        self.running = False

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.url(dbname), autocommit=True, connect_timeout=5)

    def create_database(self) -> str:
        """A fresh, empty database's name."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        with self.connect() as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        return name

    def drop_database(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def destroy(self) -> None:
        try:
            if self.running:
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


_shared = Shared(PgServer, lambda server: server.init())


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's server, shared by every module that binds this fixture (``tests/servers.py``)."""
    yield from _shared.use()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh database on the session's server (running again if a test stopped it), dropped after the test."""
    if not pg_server.running:
        pg_server.start()
    name = pg_server.create_database()
    yield pg_server.url(name)
    if not pg_server.running:
        pg_server.start()
    pg_server.drop_database(name)
