"""Settings for the whole suite.

Property tests run on shared 2-core CI machines: a first draw that happens
to be slow (imports, a busy neighbour) must not fail a run, and a deadline
per example measures the machine, not the code. The properties themselves
are unchanged.

Simulated backends keep no history of what they saw (the demo would grow
with every call); a test that reads ``requests``, ``events`` or ``count``
asks for it with ``@pytest.mark.simulator_history`` (or a module's
``pytestmark``), and every simulator built during that test keeps the last
``SIMULATOR_HISTORY`` of each.

Bytecode is written (``__pycache__``, ignored by git) even where the
environment says ``PYTHONDONTWRITEBYTECODE``: without it every server the
suite starts (a few hundred processes, workers included) compiles the whole
package again, half of its start, and every run compiles and rewrites every
test module again.
"""

import gc
import os
import sys
from typing import Iterator

import pytest
from hypothesis import HealthCheck, settings
from trio.testing import MockClock

from tests import clock

settings.register_profile("switchyard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("switchyard")

SIMULATOR_HISTORY = 10_000


# Full collections (the oldest generation's) run between tests, when this many younger ones have run since
# the last: CPython's own count, its own automatic full collection turned off.
FULL_COLLECTION_EVERY = 10


def pytest_collection_finish(session: pytest.Session) -> None:
    """The cyclic collector kept off the clock of the tests. What collection built lives as long as the run
    (every module imported, every test item, the SDKs' types, the schemas): it is frozen out of the
    collector's walks, as a worker freezes what it imported (protocol/serving/workers.py); and a full
    collection never runs inside a test, only between two. Inside one, it stopped the process for up to
    0.7 s (37 such pauses, 13 s in all, in one run), long enough for an in-process gateway to miss the
    500 ms first-byte budget of a real-clock end-to-end test."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 2**30)   # never automatic: see pytest_runtest_teardown


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if gc.get_count()[2] >= FULL_COLLECTION_EVERY:
        gc.collect()


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:   # see the module's docstring
        sys.dont_write_bytecode = False
    config.addinivalue_line("markers", "simulator_history: simulated backends built in this test keep a "
                                       "bounded history of requests and events")


@pytest.fixture
def autojump_clock() -> MockClock:
    """pytest-trio's fixture of this name, with a clock that lets a thread's work end first (tests/clock.py)."""
    return clock.autojump_clock()


@pytest.fixture(autouse=True)
def data_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's default data directory (its SQLite ledger) is a fresh one per test, never the
    user's: ``$XDG_DATA_HOME`` is what ``server.data_dir`` defaults under (servers a test starts
    inherit it)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))


@pytest.fixture(autouse=True)
def simulator_history(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("simulator_history") is None:
        yield
        return
    # here, not at the top: imported after pytest_configure, so its bytecode is written
    from switchyard.protocol.simulated.openai import SimulatedTransport

    SimulatedTransport.history = SIMULATOR_HISTORY
    try:
        yield
    finally:
        SimulatedTransport.history = 0
