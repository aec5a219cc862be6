"""GET /admin/audit: every change to keys and organizations, who made it, from where, before and after."""

from __future__ import annotations

import json

import pytest

from tests.actors.test_control_keys import ADMIN, NOW, Wall, config
from tests.harness import gateway, request

CLIENT = ("10.1.2.3", 40000)


@pytest.fixture
async def app(tmp_path, autojump_clock):
    autojump_clock.autojump_threshold = 0.02   # a thread's work (the store) ends before virtual time moves on
    async with gateway(config(tmp_path)) as app:
        app.runtime.control.clock = app.wall = Wall()
        yield app


async def admin(app, method: str, path: str, body: dict | None = None):
    return await request(app, method, path, body, ADMIN, client=CLIENT)


async def audit(app, query: str = "") -> dict:
    reply = await admin(app, "GET", f"/admin/audit{query}")
    assert reply.status == 200, reply.body
    return reply.json()


async def test_every_change_is_an_entry_with_who_where_before_and_after_and_never_a_secret(app):
    made = (await admin(app, "POST", "/admin/keys", {"id": "k1", "tier": "gold"})).json()
    await admin(app, "PATCH", "/admin/keys/k1", {"tier": "silver"})
    rotated = (await admin(app, "POST", "/admin/keys/k1/rotate", {})).json()
    await admin(app, "POST", "/admin/keys/k1/revoke")
    await admin(app, "DELETE", "/admin/keys/k1")
    await admin(app, "POST", "/admin/organizations", {"id": "acme"})
    await admin(app, "DELETE", "/admin/organizations/acme")
    log = await audit(app)
    assert [e["action"] for e in log["entries"]] == [
        "organization.delete", "organization.create", "key.delete", "key.revoke", "key.rotate", "key.update",
        "key.create"]
    assert {(e["actor"], e["address"]) for e in log["entries"]} == {("admin", "10.1.2.3")}
    update = log["entries"][5]
    assert (update["before"]["tier"], update["after"]["tier"]) == ("gold", "silver")
    assert log["entries"][6]["before"] is None and log["entries"][2]["after"] is None
    text = json.dumps(log)
    assert made["secret"] not in text and rotated["secret"] not in text
    assert made["secret"][:12] in text   # the prefix, which is public


async def test_a_refused_change_leaves_no_entry(app):
    await admin(app, "POST", "/admin/keys", {"id": "k1"})
    assert (await admin(app, "POST", "/admin/keys", {"id": "k1"})).status == 409
    assert [e["action"] for e in (await audit(app))["entries"]] == ["key.create"]


async def test_the_log_filters_and_pages_newest_first(app):
    for i in range(3):
        app.wall.now = NOW + i * 100
        await admin(app, "POST", "/admin/keys", {"id": f"k{i}"})
    assert [e["target_id"] for e in (await audit(app, "?target_id=k1"))["entries"]] == ["k1"]
    since = (await audit(app, f"?since={NOW + 100:.0f}&until=2031-01-01T00:00:00Z"))["entries"]
    assert [e["target_id"] for e in since] == ["k2", "k1"]
    first = await audit(app, "?limit=2")
    assert [e["target_id"] for e in first["entries"]] == ["k2", "k1"]
    rest = await audit(app, f"?limit=2&before={first['next']}")
    assert [e["target_id"] for e in rest["entries"]] == ["k0"] and rest["next"] is None
    bad = await admin(app, "GET", "/admin/audit?since=yesterday")
    assert bad.status == 400 and bad.json()["error"]["param"] == "since"


async def test_entries_past_the_ledgers_retention_are_deleted(app):
    await admin(app, "POST", "/admin/keys", {"id": "old"})
    app.wall.now = NOW + 91 * 86400   # usage.retention defaults to 90 days
    await admin(app, "POST", "/admin/keys", {"id": "new"})
    await app.runtime.control.prune_audit()
    assert [e["target_id"] for e in (await audit(app))["entries"]] == ["new"]


async def test_a_limit_of_other_digits_is_a_400_naming_it(app):
    reply = await admin(app, "GET", "/admin/audit?limit=%C2%B2")   # "²": a digit to str.isdigit, not to int
    assert reply.status == 400 and reply.json()["error"]["param"] == "limit"
