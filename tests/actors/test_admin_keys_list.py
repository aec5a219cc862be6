"""GET /admin/keys: every key of the running config, in config order, each as GET /admin/keys/{id} shows it."""

import math

from tests.harness import chat, gateway, request

ADMIN = [(b"authorization", b"Bearer admin-token-0123456789")]
CONFIG = """
admin: {token: admin-token-0123456789}
health_checks: {interval: 1h}
usage: {ledger: memory}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 10ms}}
organizations:
  - {id: acme, budget: {limit_usd: 50.0, period: month}}
api_keys:
  - {id: zeta, key: sk-zeta-0123456789abcdef, organization_id: acme,
     rate_limit: {requests_per_minute: 5}, budget: {limit_usd: 10.0, period: day}}
  - {id: alpha, key: sk-alpha-0123456789abcdef}
"""


async def test_admin_keys_lists_every_key_in_config_order_as_its_own_page_shows_it(autojump_clock):
    async with gateway(CONFIG) as app:
        zeta = [(b"authorization", b"Bearer sk-zeta-0123456789abcdef")]
        assert (await request(app, "POST", "/v1/chat/completions", chat(), zeta)).status == 200
        # The list and the pages are read at one instant: the clock no longer jumps while the ledger's
        # thread (a budget's seed, a batch written) leaves every task waiting, so the windows compare.
        autojump_clock.autojump_threshold = math.inf
        reply = await request(app, "GET", "/admin/keys", None, ADMIN)
        assert reply.status == 200
        keys = reply.json()["keys"]
        assert [k["id"] for k in keys] == ["zeta", "alpha"]
        for key in keys:
            assert key == (await request(app, "GET", f"/admin/keys/{key['id']}", None, ADMIN)).json()
        assert keys[0]["rate_limit"]["windows"]["requests_per_minute"]["remaining"] == 4
        assert keys[0]["organization"]["id"] == "acme" and keys[1]["budget"] is None


async def test_admin_keys_never_shows_a_secret(autojump_clock):
    async with gateway(CONFIG) as app:
        body = (await request(app, "GET", "/admin/keys", None, ADMIN)).body.decode()
        assert "sk-zeta" not in body and "sk-alpha" not in body and '"key"' not in body


async def test_admin_keys_without_keys_is_an_empty_list(autojump_clock):
    bare = CONFIG.split("organizations:")[0]
    async with gateway(bare) as app:
        assert (await request(app, "GET", "/admin/keys", None, ADMIN)).json() == {"keys": [], "next": None}


async def test_admin_keys_needs_the_admin_token(autojump_clock):
    async with gateway(CONFIG) as app:
        assert (await request(app, "GET", "/admin/keys")).status == 401
        assert (await request(app, "POST", "/admin/keys", {}, [])).status == 401
