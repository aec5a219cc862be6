"""GET /admin/alerts: what the gateway's alerts actor claimed, newest first, filtered, with each status."""

from __future__ import annotations

import trio

from tests.actors.test_control_keys import ADMIN, NOW, Wall, config
from tests.harness import gateway, request
from tests.webhooks import Receiver

DAY = 86_400.0


async def test_alerts_are_listed_newest_first_and_filtered(tmp_path, autojump_clock):
    autojump_clock.autojump_threshold = 0.02   # a thread's work (the store) ends before virtual time moves on
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        url = await receiver.start(nursery)
        yaml = config(tmp_path) + f"alerts: {{webhooks: [{{url: {url}}}], expiry_notice: 7d}}\n"
        async with gateway(yaml) as app:
            app.runtime.control.clock = app.runtime.alerts.clock = Wall()
            for body in ({"id": "soon", "expires_at": NOW + 2 * DAY}, {"id": "gone"}):
                assert (await request(app, "POST", "/admin/keys", body, ADMIN)).status == 201
            await trio.sleep(15)
            assert (await request(app, "POST", "/admin/keys/gone/revoke", None, ADMIN)).status == 200
            await trio.sleep(15)
            listed = (await request(app, "GET", "/admin/alerts", None, ADMIN)).json()["alerts"]
            revoked = (await request(app, "GET", "/admin/alerts?event=key.revoked", None, ADMIN)).json()["alerts"]
            bad = await request(app, "GET", "/admin/alerts?status=lost", None, ADMIN)
        nursery.cancel_scope.cancel()
    assert [(a["event"], a["owner_id"], a["status"], a["attempts"]) for a in listed] == [
        ("key.revoked", "gone", "delivered", 1), ("key.expiring", "soon", "delivered", 1)]
    assert [a["owner_id"] for a in revoked] == ["gone"]
    assert bad.status == 400 and "status must be one of pending, delivered, failed" in bad.body.decode()
    assert sorted(g[3]["event"] for g in receiver.got) == ["key.expiring", "key.revoked"]


async def test_the_budgets_watched_are_the_config_s_and_the_database_s(tmp_path, autojump_clock):
    autojump_clock.autojump_threshold = 0.02
    yaml = config(tmp_path).replace("{id: team-config, key:", "{id: team-config, budget: {limit_usd: 5}, key:") + \
        "organizations:\n  - {id: config-org, budget: {limit_tokens: 1000, period: day}}\n"
    async with gateway(yaml) as app:
        app.runtime.control.clock = Wall()
        for path, body in (("/admin/keys", {"id": "db-key", "budget": {"limit_usd": 2}}),
                           ("/admin/keys", {"id": "free"}),
                           ("/admin/organizations", {"id": "db-org", "budget": {"limit_usd": 50, "period": "week"}})):
            assert (await request(app, "POST", path, body, ADMIN)).status == 201
        owners = app.runtime._alert_owners()
    assert sorted((owner, owner_id, budget.period.value) for owner, owner_id, budget in owners.budgets) == [
        ("key", "db-key", "month"), ("key", "team-config", "month"),
        ("organization", "config-org", "day"), ("organization", "db-org", "week")]
    assert sorted(k.id for k in owners.keys) == ["db-key", "free"]
