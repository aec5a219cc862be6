"""The embedded demo's printed console link in a real browser (docs/console.md#the-demos-link): opening it
lands on the console, logged in, with the token gone from the address bar."""

from __future__ import annotations

import re
from typing import Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Served, screenshot

LINK = re.compile(r"http://127\.0\.0\.1:\d+/admin/ui/\?token=[A-Za-z0-9_-]+")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("console-demo"), demo=True)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def printed_link(page, served: Served) -> str:
    """The link ``serve`` printed (once listening: a moment after /ready may answer)."""
    for _ in range(100):
        found = LINK.search(served.log_path.read_text())
        if found:
            return found.group(0)
        page.wait_for_timeout(50)
    raise AssertionError(f"no console link printed: {served.log_path.read_text()}")


def test_the_printed_link_opens_the_console_logged_in_without_the_token_in_the_address(page, served):
    page.goto(printed_link(page, served))
    expect(page).to_have_url(served.url + "/admin/ui/")
    expect(page.locator("h1")).to_have_text("Backends")
    expect(page.locator("tr[data-backend]")).to_have_count(2)   # the demo's sim-a and sim-b
    cookies = page.context.cookies()
    assert [(c["httpOnly"], c["sameSite"]) for c in cookies] == [(True, "Strict")]
    screenshot(page, "demo-link")
