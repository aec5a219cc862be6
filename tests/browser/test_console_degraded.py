"""The console when parts of what it reads are off or failing (docs/console.md): health checks turned off, a
disabled backend, and the usage ledger answering 503 while this worker still holds a call's route events and
the limiter still holds the keys' budgets."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Served, console_config, log_in, screenshot
from tests.browser.test_console_browser import chat, client

LEDGER_DOWN = {"error": {"message": "The usage ledger's store is unavailable: usage.db: database is locked",
                         "type": "server_error", "param": None, "code": "usage_ledger_unavailable"}}


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


def test_a_request_whose_ledger_record_cannot_be_read_still_shows_its_attempts(page, served):
    raw = chat(client(served, "team-request"), model="flaky")   # sim-broken answers 503; falls back to demo
    request_id = raw.headers["x-continuum-request-id"]
    log_in(page, served)
    expect(page.locator("tr[data-backend]")).to_have_count(5)
    # the ledger's store down, as GET /admin/usage/requests/{id} then answers; the events are in this worker
    page.route("**/admin/usage/requests/**", lambda route: route.fulfill(
        status=503, content_type="application/json", body=json.dumps(LEDGER_DOWN)))
    page.goto(f"{served.url}/admin/ui/request?id={request_id}")
    attempts = page.locator("#request-result tr[data-attempt]")
    expect(attempts).to_have_count(2)
    expect(attempts.nth(0)).to_contain_text("failed: status 503")
    expect(page.locator("#request-result [role=alert]")).to_contain_text("usage_ledger_unavailable")
    expect(page.locator("#status")).not_to_have_class("status error")
    screenshot(page, "request-ledger-down")


def test_usage_page_shows_the_keys_limits_while_the_ledger_cannot_answer(page, served):
    log_in(page, served)
    expect(page.locator("tr[data-backend]")).to_have_count(5)
    # the ledger's store down, as GET /admin/usage then answers; /admin/keys reads the limiter, not the ledger
    page.route(re.compile(r"/admin/usage\?"), lambda route: route.fulfill(
        status=503, content_type="application/json", body=json.dumps(LEDGER_DOWN)))
    page.click('nav a[href="usage"]')
    expect(page.locator('tr[data-key="team-usage"]')).to_contain_text("of $5.00 left")
    expect(page.locator("#status")).to_contain_text("usage_ledger_unavailable")
    screenshot(page, "usage-ledger-down")
