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
"""

from typing import Iterator

import pytest
from hypothesis import HealthCheck, settings

from switchyard.protocol.simulated.openai import SimulatedTransport

settings.register_profile("switchyard", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("switchyard")

SIMULATOR_HISTORY = 10_000


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "simulator_history: simulated backends built in this test keep a "
                                       "bounded history of requests and events")


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
    SimulatedTransport.history = SIMULATOR_HISTORY
    try:
        yield
    finally:
        SimulatedTransport.history = 0
