"""The console in a real browser (docs/console.md): log in; a backend going unhealthy shows by itself; a
request found by its id shows its attempts; the usage chart has the calls just made; a hostile model name
renders as text; the config page's reload names an error's dotted path. Every page looked at is saved
as a screenshot (conftest.py says where)."""

from __future__ import annotations

import re
from typing import Any

import openai
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ADMIN_TOKEN, Served, console_config, log_in, screenshot, secret

HOSTILE = '<img src=x onerror="window.__pwned=1">'
LEDGER_WAIT = 10.0   # seconds: a call's record reaches the ledger within usage.flush_interval (100 ms here)


def client(served: Served, key_id: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url + "/v1", api_key=secret(key_id), max_retries=0, timeout=15)


def chat(api: openai.OpenAI, model: str = "demo") -> Any:
    return api.chat.completions.with_raw_response.create(model=model, messages=[{"role": "user", "content": "hi"}])


def wait_for_ledger(page: Any, served: Served, key_id: str, requests: int) -> None:
    """Until the ledger holds ``requests`` calls of ``key_id`` (read through the admin API, as a script would)."""
    waited = 0.0
    while True:
        groups = served.admin("GET", f"/admin/usage?key={key_id}").json()["groups"]
        if groups[0]["requests"] >= requests:
            return
        assert waited < LEDGER_WAIT, f"the ledger has {groups[0]['requests']} of {requests} calls of {key_id}"
        page.wait_for_timeout(100)
        waited += 0.1


def calls_then_log_in(page: Any, served: Served, key_id: str, calls: int) -> None:
    """``calls`` chat calls with ``key_id``, in the ledger, then the console logged in."""
    api = client(served, key_id)
    for _ in range(calls):
        chat(api)
    wait_for_ledger(page, served, key_id, calls)
    log_in(page, served)


def test_login_trades_the_admin_token_for_the_console(page, served):
    page.goto(served.url + "/admin/ui/usage")
    expect(page).to_have_url(served.url + "/admin/ui/login?next=usage")
    screenshot(page, "login")
    page.fill("#token", "not-the-token")
    page.click("button[type=submit]")
    expect(page.locator(".login-form .error")).to_have_text("That is not the admin token.")
    page.fill("#token", ADMIN_TOKEN)
    page.click("button[type=submit]")
    expect(page).to_have_url(served.url + "/admin/ui/usage")
    expect(page.locator("h1")).to_have_text("Usage and spend")
    cookies = page.context.cookies()
    assert [(c["httpOnly"], c["sameSite"]) for c in cookies] == [(True, "Strict")]
    assert ADMIN_TOKEN not in cookies[0]["value"] and ADMIN_TOKEN not in page.url


def test_logging_out_ends_the_session(page, served):
    log_in(page, served)
    expect(page.locator("tr[data-backend]")).to_have_count(4)
    page.click(".logout button")
    expect(page).to_have_url(served.url + "/admin/ui/login")
    page.goto(served.url + "/admin/ui/config")
    expect(page).to_have_url(served.url + "/admin/ui/login?next=config")


def test_backends_page_shows_a_backend_go_unhealthy_within_one_refresh(page, served):
    log_in(page, served)
    spare = page.locator('tr[data-backend="sim-spare"]')
    expect(spare).to_have_attribute("data-state", "healthy")
    page.evaluate("window.__sameDocument = true")
    try:
        served.write(console_config(served.root / "data", spare_health=500))
        assert served.admin("POST", "/admin/config/reload").json()["result"] == "applied"
        # two failed checks a second apart, then the page's next refresh (every 3 s): well within 10 s
        expect(spare).to_have_attribute("data-state", "unhealthy", timeout=10_000)
        expect(spare.locator(".why")).to_contain_text("500")
        assert page.evaluate("window.__sameDocument") is True   # it refreshed by itself, never reloaded
        expect(page.locator(".summary")).to_contain_text("1 unhealthy")
        screenshot(page, "backends-unhealthy")
    finally:
        served.write(console_config(served.root / "data"))
        served.admin("POST", "/admin/config/reload")
    expect(spare).to_have_attribute("data-state", "healthy", timeout=10_000)
    screenshot(page, "backends")


def test_a_request_found_by_its_id_shows_its_attempts(page, served):
    raw = chat(client(served, "team-request"), model="flaky")   # sim-broken answers 503; falls back to demo
    request_id = raw.headers["x-continuum-request-id"]
    wait_for_ledger(page, served, "team-request", 1)
    log_in(page, served)
    page.click('nav a[href="request"]')
    page.fill("#request-id", request_id)
    page.click("#request-form button")
    attempts = page.locator("#request-result tr[data-attempt]")
    expect(attempts).to_have_count(2)
    expect(attempts.nth(0)).to_contain_text("sim-broken")
    expect(attempts.nth(0)).to_contain_text("failed: status 503")
    expect(attempts.nth(1)).to_contain_text("completed")
    expect(page.locator('#request-result tr[data-event="route_changed"]')).to_have_count(1)
    expect(page.locator("#request-result table.record")).to_contain_text("team-request")
    assert page.url.endswith(f"/admin/ui/request?id={request_id}")   # the lookup can be linked to
    screenshot(page, "request")


def test_usage_chart_has_the_calls_just_made(page, served):
    calls_then_log_in(page, served, "team-usage", 3)
    page.click('nav a[href="usage"]')
    bar = page.locator('figure:has(figcaption:text-is("Requests by key")) g[data-label="team-usage"]')
    expect(bar).to_contain_text("3")
    expect(bar.locator("rect.bar")).to_have_count(1)
    expect(page.locator('tr[data-group="team-usage"] td').nth(1)).to_have_text("3")
    # the second and third call were cache hits: counted, and what they saved priced from the first
    expect(page.locator('tr[data-group="team-usage"] td').nth(6)).to_have_text("2")
    expect(page.locator('tr[data-group="team-usage"] td').nth(7)).to_contain_text("$")
    key = page.locator('tr[data-key="team-usage"]')
    expect(key).to_contain_text("of $5.00 left")
    expect(key).to_contain_text("requests per minute")
    csv = page.locator(".links a").first.get_attribute("href")
    assert csv is not None and csv.startswith("../usage.csv?")
    screenshot(page, "usage")


def test_a_hostile_model_name_renders_as_text(page, served):
    with pytest.raises(openai.NotFoundError):
        chat(client(served, "team-hostile"), model=HOSTILE)
    wait_for_ledger(page, served, "team-hostile", 1)
    log_in(page, served)
    page.click('nav a[href="usage"]')
    page.select_option("#usage-group", "model")
    row = page.locator("tr[data-group]").filter(has_text=HOSTILE)
    expect(row.locator("td").first).to_have_text(HOSTILE)
    page.click('nav a[href="traffic"]')
    expect(page.locator("tr[data-group]").filter(has_text=HOSTILE)).to_have_count(1)
    expect(page.locator("ul.legend li").filter(has_text=HOSTILE).first).to_be_visible()
    assert page.locator("#content img").count() == 0
    assert page.evaluate("window.__pwned") is None
    screenshot(page, "traffic-hostile-name")


def test_traffic_page_charts_requests_per_model(page, served):
    calls_then_log_in(page, served, "team-traffic", 2)
    page.click('nav a[href="traffic"]')
    demo = page.locator('tr[data-group="demo"] td')
    expect(demo.first).to_have_text("demo")
    assert int(demo.nth(1).inner_text().replace(",", "")) >= 2
    lines = page.locator('figure:has(figcaption:text-is("Requests per second")) g[data-series="demo"]')
    expect(lines.locator("circle")).not_to_have_count(0)
    page.select_option("#traffic-group", "backend")
    expect(page.locator('tr[data-group="sim-a"]')).to_have_count(1)
    screenshot(page, "traffic")


def test_usage_page_groups_by_endpoint_and_filters_by_one(page, served):
    # the only embeddings calls of this module's tests
    api = client(served, "team-embeddings")
    chat(api)
    for _ in range(2):
        api.embeddings.create(model="demo", input="hi")
    wait_for_ledger(page, served, "team-embeddings", 3)
    log_in(page, served)
    page.click('nav a[href="usage"]')
    heading = page.locator("#content section h2").first
    expect(heading).to_have_text("By key")   # each change of a control below waits for the answer to the last
    page.select_option("#usage-group", "endpoint")
    expect(heading).to_have_text("By endpoint")
    expect(page.locator('tr[data-group="embeddings"] td').nth(1)).to_have_text("2")
    expect(page.locator('tr[data-group="chat"]')).to_have_count(1)
    expect(page.locator('figure:has(figcaption:text-is("Requests by endpoint")) g[data-label="embeddings"]')
           ).to_contain_text("2")
    screenshot(page, "usage-by-endpoint")
    page.select_option("#usage-group", "key")
    expect(heading).to_have_text("By key")
    page.select_option("#usage-endpoint", "embeddings")
    expect(heading).to_have_text("By key, embeddings calls only")
    rows = page.locator("#content section").first.locator("tr[data-group]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-group", "team-embeddings")
    expect(rows.first.locator("td").nth(1)).to_have_text("2")
    assert "endpoint=embeddings" in (page.locator(".links a").first.get_attribute("href") or "")
    screenshot(page, "usage-one-endpoint")


def test_traffic_page_groups_by_endpoint_and_filters_by_one(page, served):
    # the only text completions calls of this module's tests
    api = client(served, "team-completions")
    chat(api)
    for _ in range(2):
        api.completions.create(model="demo", prompt="hi")
    wait_for_ledger(page, served, "team-completions", 3)
    log_in(page, served)
    page.click('nav a[href="traffic"]')
    heading = page.locator("#content section h2")
    expect(heading).to_have_text("Over the 1 hour, by model")   # each change below waits for the last's answer
    page.select_option("#traffic-group", "endpoint")
    expect(heading).to_have_text("Over the 1 hour, by endpoint")
    expect(page.locator('tr[data-group="completions"] td').nth(1)).to_have_text("2")
    expect(page.locator('tr[data-group="chat"]')).to_have_count(1)
    lines = page.locator('figure:has(figcaption:text-is("Requests per second")) g[data-series="completions"]')
    expect(lines.locator("circle")).not_to_have_count(0)
    page.select_option("#traffic-endpoint", "completions")
    expect(heading).to_have_text("Over the 1 hour, by endpoint, completions calls only")
    expect(page.locator("tr[data-group]")).to_have_count(1)
    page.select_option("#traffic-group", "backend")
    expect(heading).to_have_text("Over the 1 hour, by backend, completions calls only")
    rows = page.locator("tr[data-group]")
    expect(rows.first).to_have_attribute("data-group", re.compile("^sim-[ab]$"))
    assert sum(int(rows.nth(n).locator("td").nth(1).inner_text()) for n in range(rows.count())) == 2
    screenshot(page, "traffic-one-endpoint")


def test_config_page_reload_names_the_error_at_its_dotted_path(page, served):
    log_in(page, served)
    page.click('nav a[href="config"]')
    expect(page.locator("#config-json")).to_contain_text('"token": "***"')
    assert ADMIN_TOKEN not in page.locator("#config-json").inner_text()
    broken = console_config(served.root / "data")
    broken["backends"][0]["weight"] = -1
    try:
        served.write(broken)
        page.click("#reload")
        expect(page.locator("#reload-outcome")).to_contain_text("Rejected")
        expect(page.locator("#reload-outcome ul.errors")).to_contain_text("backends[0].weight")
        expect(page.locator("#reload-status")).to_contain_text("backends[0].weight")
        screenshot(page, "config-rejected")
    finally:
        served.write(console_config(served.root / "data"))
    page.click("#reload")
    expect(page.locator("#reload-outcome")).to_contain_text("unchanged")
    screenshot(page, "config")


def test_config_page_shows_when_the_last_reload_was_as_a_date(page, served):
    log_in(page, served)
    page.click('nav a[href="config"]')
    page.click("#reload")
    expect(page.locator("#reload-outcome")).to_contain_text(re.compile("unchanged|applied"))
    last = page.locator("#reload-status tr").filter(has_text="last reload").locator("td")
    expect(last).to_have_text(re.compile(r"^(unchanged|applied), \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(admin\)$"))


def test_config_page_reads_the_running_config_again_when_a_reload_elsewhere_changes_it(page, served):
    log_in(page, served)
    page.click('nav a[href="config"]')
    expect(page.locator("#config-json")).to_contain_text('"name": "sim-a"')
    changed = console_config(served.root / "data")
    changed["backends"][0]["weight"] = 7
    try:
        served.write(changed)
        assert served.admin("POST", "/admin/config/reload").json()["result"] == "applied"   # not the page's button
        expect(page.locator("#config-json")).to_contain_text('"weight": 7', timeout=10_000)
    finally:
        served.write(console_config(served.root / "data"))
        served.admin("POST", "/admin/config/reload")


def test_traffic_charts_draw_the_busiest_groups_and_the_table_lists_all(page, served):
    api = client(served, "team-many")
    for n in range(9):
        with pytest.raises(openai.NotFoundError):
            chat(api, model=f"nosuch-{n}")
    wait_for_ledger(page, served, "team-many", 9)
    log_in(page, served)
    page.click('nav a[href="traffic"]')
    expect(page.locator("#traffic-charted")).to_contain_text("The charts show the 8 models with the most requests")
    legend = page.locator('figure:has(figcaption:text-is("Requests per second")) ul.legend li')
    expect(legend).to_have_count(8)
    rows = page.locator("tr[data-group]").count()   # every model: the nine unknown ones, and demo if called yet
    assert rows >= 9
    expect(page.locator("#traffic-charted")).to_contain_text(f"most requests of {rows};")
