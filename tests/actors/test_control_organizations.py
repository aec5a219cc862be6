"""Organizations kept in the database through the admin API: made, shown, changed and deleted while running;
their limits shared by every key that names them."""

from __future__ import annotations

import pytest

from tests.actors.test_control_keys import ADMIN, Wall, bearer, config
from tests.harness import chat, gateway, request

CONFIG_ORG = "\norganizations:\n  - {id: config-org, budget: {limit_usd: 10.0}}\n"


@pytest.fixture
async def app(tmp_path, autojump_clock):
    autojump_clock.autojump_threshold = 0.02   # a thread's work (the store) ends before virtual time moves on
    async with gateway(config(tmp_path) + CONFIG_ORG) as app:
        app.runtime.control.clock = Wall()
        yield app


async def post(app, path: str, body: dict) -> dict:
    reply = await request(app, "POST", path, body, ADMIN)
    assert reply.status == 201, reply.body
    return reply.json()


async def test_an_organizations_rate_limit_is_shared_by_its_keys(app):
    org = await post(app, "/admin/organizations", {"id": "acme", "rate_limit": {"requests_per_minute": 1}})
    assert (org["source"], org["rate_limit"]["requests_per_minute"]) == ("database", 1)
    one = (await post(app, "/admin/keys", {"organization_id": "acme"}))["secret"]
    two = (await post(app, "/admin/keys", {"organization_id": "acme"}))["secret"]
    assert (await request(app, "POST", "/v1/chat/completions", chat(), bearer(one))).status == 200
    reply = await request(app, "POST", "/v1/chat/completions", chat(), bearer(two))
    assert reply.status == 429


async def test_config_organizations_are_listed_read_only_and_keep_their_ids(app):
    await post(app, "/admin/organizations", {"id": "db-org"})
    listed = (await request(app, "GET", "/admin/organizations", None, ADMIN)).json()["organizations"]
    assert [(o["id"], o["source"]) for o in listed] == [("config-org", "config"), ("db-org", "database")]
    assert listed[0]["read_only"] and listed[0]["budget"]["limit_usd"] == 10.0
    patched = await request(app, "PATCH", "/admin/organizations/config-org", {"budget": None}, ADMIN)
    assert patched.status == 403 and patched.json()["error"]["code"] == "organization_read_only"
    taken = await request(app, "POST", "/admin/organizations", {"id": "config-org"}, ADMIN)
    assert taken.status == 409 and taken.json()["error"]["param"] == "body.id"


async def test_a_change_and_a_delete_apply_at_once(app):
    await post(app, "/admin/organizations", {"id": "acme", "metadata": {"team": "a"}})
    changed = await request(app, "PATCH", "/admin/organizations/acme", {"budget": {"limit_usd": 3.0}}, ADMIN)
    assert changed.status == 200 and changed.json()["budget"]["limit_usd"] == 3.0
    assert changed.json()["metadata"] == {"team": "a"}
    assert app.runtime.control.view.organizations["acme"].organization.budget.limit_usd == 3.0
    assert (await request(app, "DELETE", "/admin/organizations/acme", None, ADMIN)).status == 200
    assert (await request(app, "GET", "/admin/organizations/acme", None, ADMIN)).status == 404


async def test_an_organization_its_keys_still_name_is_not_deleted(app):
    await post(app, "/admin/organizations", {"id": "acme"})
    await post(app, "/admin/keys", {"id": "k1", "organization_id": "acme"})
    refused = await request(app, "DELETE", "/admin/organizations/acme", None, ADMIN)
    assert refused.status == 409 and "k1" in refused.json()["error"]["message"]
    await request(app, "DELETE", "/admin/keys/k1", None, ADMIN)
    assert (await request(app, "DELETE", "/admin/organizations/acme", None, ADMIN)).status == 200


async def test_a_bad_organization_body_names_its_paths(app):
    reply = await request(app, "POST", "/admin/organizations", {"budget": {"limit_usd": -1}}, ADMIN)
    error = reply.json()["error"]
    assert reply.status == 400 and [e["path"] for e in error["details"]["errors"]] == [
        "body.id", "body.budget.limit_usd"]
    patch = await request(app, "PATCH", "/admin/organizations/nobody", {"budget": None}, ADMIN)
    assert patch.status == 404 and patch.json()["error"]["code"] == "organization_not_found"


async def test_a_keys_page_shows_its_database_organizations_budget(app):
    await post(app, "/admin/organizations", {"id": "acme", "budget": {"limit_usd": 7.0}})
    made = await post(app, "/admin/keys", {"id": "k1", "organization_id": "acme"})
    assert made["organization"]["budget"]["limit_usd"] == 7.0
    mine = (await request(app, "GET", "/v1/key", None, bearer(made["secret"]))).json()["data"]
    assert mine["organization"]["budget"]["left_usd"] == 7.0
