"""The console's keys, organizations and audit pages in a real browser (docs/console.md): a key made with the
form shows its secret once and is listed; revoking one changes its status; a viewer's session is offered no
change; the audit page lists a change. Every page looked at is saved as a screenshot (conftest.py says where)."""

from __future__ import annotations

import re
from typing import Any, Iterator

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ADMIN_TOKEN, Served, console_config, log_in, screenshot


def config(root: Any) -> dict[str, Any]:
    """The browser tests' gateway with one organization in the config (read only on the console)."""
    out = console_config(root / "data")
    out["organizations"] = [{"id": "acme", "budget": {"limit_usd": 50, "period": "month"}}]
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-keys")
    server = Served(root, config(root))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def api(served: Served, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = httpx.request(method, served.url + path, json=body, timeout=10,
                          headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert reply.status_code < 300, reply.text
    return reply.json()


def keys_page(page: Any, served: Served, token: str = ADMIN_TOKEN) -> None:
    log_in(page, served, token)
    page.goto(served.url + "/admin/ui/keys")
    expect(page.locator('tr[data-key="team-usage"]')).to_be_visible()


def test_a_key_made_with_the_form_shows_its_secret_once_and_is_listed(page, served):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served.url)
    keys_page(page, served)
    page.click("#create-key")
    page.fill("#field-id", "web-app")
    page.select_option("#field-organization_id", "acme")
    page.fill("#field-allowed_models", "demo")
    page.fill("#field-budget_limit_usd", "5")
    page.fill("#field-metadata", "team=web")
    page.click("dialog button[type=submit]")
    shown = page.locator("#new-secret")
    expect(shown).to_have_text(re.compile(r"^syk_\w+$"))
    expect(page.locator("dialog")).to_contain_text("shown this once")
    secret = shown.inner_text()
    page.click("#copy-secret")
    expect(page.locator("dialog")).to_contain_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    screenshot(page, "keys-secret")
    page.click("dialog button:has-text('Close')")
    row = page.locator('tr[data-key="web-app"]')
    expect(row).to_have_attribute("data-status", "active")
    expect(row).to_contain_text(secret[:12])
    expect(row).to_contain_text("$5.00")
    assert secret not in page.content()   # shown once: gone with its dialog
    made = api(served, "GET", "/admin/keys/web-app")
    assert (made["organization_id"], made["settings"]["allowed_models"], made["metadata"]) == (
        "acme", ["demo"], {"team": "web"})
    answer = httpx.get(served.url + "/v1/models", headers={"authorization": f"Bearer {secret}"}, timeout=10)
    assert answer.status_code == 200


def test_revoking_a_key_changes_its_status_after_a_confirmation(page, served):
    api(served, "POST", "/admin/keys", {"id": "to-revoke"})
    keys_page(page, served)
    row = page.locator('tr[data-key="to-revoke"]')
    expect(row).to_have_attribute("data-status", "active")
    row.locator('[data-action="revoke"]').click()
    expect(page.locator("dialog")).to_contain_text("Revoke to-revoke?")
    page.click("dialog button[type=submit]")
    expect(row).to_have_attribute("data-status", "revoked")
    expect(row.locator('[data-action="rotate"]')).to_have_count(0)
    expect(page.locator('tr[data-key="team-usage"]')).to_contain_text("read only (config)")
    assert api(served, "GET", "/admin/keys/to-revoke")["status"] == "revoked"
    screenshot(page, "keys")
    page.select_option("#field-status", "revoked")
    expect(page.locator("tr[data-key]")).to_have_count(1)
    expect(row).to_be_visible()


def test_editing_and_rotating_a_key_with_a_grace(page, served):
    api(served, "POST", "/admin/keys", {"id": "to-change", "tier": "silver"})
    keys_page(page, served)
    row = page.locator('tr[data-key="to-change"]')
    row.locator('[data-action="edit"]').click()
    expect(page.locator("#field-tier")).to_have_value("silver")
    page.fill("#field-tier", "gold")
    page.fill("#field-rate_requests_per_minute", "30")
    page.click("dialog button[type=submit]")
    expect(page.locator("dialog")).to_have_count(0)
    changed = api(served, "GET", "/admin/keys/to-change")["settings"]
    assert (changed["tier"], changed["rate_limit"]["requests_per_minute"]) == ("gold", 30)
    row.locator('[data-action="rotate"]').click()
    page.fill("#field-grace_seconds", "3600")
    page.click("dialog button[type=submit]")
    expect(page.locator("#new-secret")).to_have_text(re.compile(r"^syk_\w+$"))
    expect(page.locator("dialog")).to_contain_text("The old secret works until")
    page.click("dialog button:has-text('Close')")
    rotated = api(served, "GET", "/admin/keys/to-change")
    assert rotated["previous_secret"] is not None and rotated["prefix"] != rotated["previous_secret"]["prefix"]


def test_a_viewers_session_is_offered_no_change(page, served):
    token = api(served, "POST", "/admin/admins", {"id": "watcher", "role": "viewer"})["token"]
    api(served, "POST", "/admin/keys", {"id": "seen-by-viewer"})
    keys_page(page, served, token)
    expect(page.locator('tr[data-key="seen-by-viewer"]')).to_be_visible()
    expect(page.locator("#create-key")).to_have_count(0)
    expect(page.locator("[data-action]")).to_have_count(0)
    page.goto(served.url + "/admin/ui/organizations")
    expect(page.locator('tr[data-organization="acme"]')).to_be_visible()
    expect(page.locator("#create-organization")).to_have_count(0)
    page.goto(served.url + "/admin/ui/config")
    expect(page.locator("#reload-status")).to_contain_text("running revision")
    expect(page.locator("#reload")).to_have_count(0)


def test_an_organization_made_with_the_form_is_listed_and_edited(page, served):
    log_in(page, served)
    page.goto(served.url + "/admin/ui/organizations")
    expect(page.locator('tr[data-organization="acme"]')).to_contain_text("read only (config)")
    page.click("#create-organization")
    page.fill("#field-id", "globex")
    page.fill("#field-rate_requests_per_minute", "120")
    page.click("dialog button[type=submit]")
    row = page.locator('tr[data-organization="globex"]')
    expect(row).to_contain_text("requests per minute: 120")
    row.locator('[data-action="edit"]').click()
    page.fill("#field-budget_limit_usd", "20")
    page.click("dialog button[type=submit]")
    expect(row).to_contain_text("$20.00 a month")
    screenshot(page, "organizations")
    assert api(served, "GET", "/admin/organizations/globex")["rate_limit"]["requests_per_minute"] == 120


def test_the_audit_page_lists_a_change_newest_first(page, served):
    api(served, "POST", "/admin/keys", {"id": "audited"})
    api(served, "PATCH", "/admin/keys/audited", {"tier": "gold"})
    log_in(page, served)
    page.goto(served.url + "/admin/ui/audit")
    rows = page.locator("tr[data-seq]")
    expect(rows.first).to_have_attribute("data-action", "key.update")
    expect(rows.first).to_have_attribute("data-target", "audited")
    expect(rows.first).to_contain_text('tier: null → "gold"')
    screenshot(page, "audit")   # with the other tests' changes before it
    page.fill("#field-target_id", "audited")
    page.click("#audit-filters button[type=submit]")
    expect(rows).to_have_count(2)
    expect(rows.nth(1)).to_have_attribute("data-action", "key.create")


def test_the_keys_page_shows_fifty_keys_a_page_and_goes_on_to_the_next(page, served):
    api(served, "POST", "/admin/organizations", {"id": "paging"})
    for n in range(51):   # one more key than a page holds; ids listed after the other tests'
        api(served, "POST", "/admin/keys", {"id": f"zz-page-{n:02d}", "organization_id": "paging"})
    keys_page(page, served)
    page.select_option("#field-organization", "paging")
    rows = page.locator("tr[data-key]")
    expect(rows).to_have_count(50)
    expect(page.locator("#keys-first")).to_be_disabled()
    page.click("#keys-next")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-key", "zz-page-50")
    expect(page.locator("#keys-next")).to_be_disabled()
    page.click("#keys-first")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_attribute("data-key", "zz-page-00")


def test_the_audit_page_goes_back_a_page_at_a_time(page, served):
    api(served, "POST", "/admin/keys", {"id": "paged"})
    for n in range(50):   # one more entry than a page holds
        api(served, "PATCH", "/admin/keys/paged", {"tier": f"t{n}"})
    log_in(page, served)
    page.goto(served.url + "/admin/ui/audit")
    page.fill("#field-target_id", "paged")
    page.click("#audit-filters button[type=submit]")
    rows = page.locator("tr[data-seq]")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text('"t48" → "t49"')
    page.click("#audit-older")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-action", "key.create")
    expect(page.locator("#audit-older")).to_be_disabled()
    page.click("#audit-newest")
    expect(rows).to_have_count(50)
