"""The console when parts of what it reads are off or failing (docs/console.md): health checks turned off and
a disabled backend."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Served, console_config, log_in, screenshot


def degraded_config(root: Any) -> dict[str, Any]:
    """The browser tests' gateway with health checks off and one more backend, disabled."""
    config = console_config(root / "data")
    config["health_checks"] = {"enabled": False}
    config["backends"].append({"name": "sim-off", "type": "simulated", "models": ["demo"], "enabled": False})
    return config


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-degraded")
    server = Served(root, degraded_config(root))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def test_backends_page_shows_backends_unchecked_while_health_checks_are_off(page, served):
    log_in(page, served)
    rows = page.locator("tr[data-backend]")
    expect(rows).to_have_count(5)
    for name in ("sim-a", "sim-b", "sim-spare", "sim-broken"):
        row = page.locator(f'tr[data-backend="{name}"]')
        expect(row).to_have_attribute("data-state", "unchecked")
        expect(row.locator("td").nth(1)).to_have_text("uncheckedhealth checks off")   # no made-up "since"
    expect(page.locator('tr[data-backend="sim-off"]')).to_have_attribute("data-state", "disabled")
    expect(page.locator(".summary")).to_contain_text("health checks are off")
    screenshot(page, "backends-checks-off")

