"""End-to-end: ``switchyard keys`` beside a running gateway on one data dir: a key it makes answers calls
within seconds, its revocation applies as fast, and its JSON is the admin API's for the key's record."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import trio

from switchyard.protocol.serving.cli import main
from tests.e2e.support import backend, gateway_config, switchyard_serve

ADMIN = "admin-token-0123456789"
CONFIG_KEY = "sk-config-0123456789abcdef"


def config(data: Path) -> dict:
    """A gateway with a config key, so the data plane asks every call for a key from the start."""
    return gateway_config(backend("a"), server={"bind_address": "127.0.0.1:8080", "data_dir": str(data)},
                          admin={"token": ADMIN}, api_keys=[{"id": "team-config", "key": CONFIG_KEY}])


async def keys(capsys, config_path: Path, *args: str) -> dict:
    """``switchyard keys ... --json`` in a worker thread (it runs its own Trio loop), its JSON."""
    with trio.fail_after(10):
        rc = await trio.to_thread.run_sync(main, ["keys", *args, "--config", str(config_path), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


async def status_within(http: httpx.AsyncClient, secret: str, wanted: int, seconds: float) -> float:
    """Calls with ``secret`` until one answers ``wanted``; how long that took."""
    start = trio.current_time()
    with trio.fail_after(seconds):
        while True:
            reply = await http.post("/v1/chat/completions", headers={"authorization": f"Bearer {secret}"},
                                    json={"model": "demo", "messages": [{"role": "user", "content": "hi"}]})
            if reply.status_code == wanted:
                return trio.current_time() - start
            await trio.sleep(0.05)


async def test_a_key_made_while_serve_runs_answers_within_2_s_and_its_revocation_applies(tmp_path, capsys):
    async with switchyard_serve(tmp_path, config(tmp_path / "data")) as (_, url, _):
        made = await keys(capsys, tmp_path / "cli.yaml", "create", "--id", "from-cli")
        async with httpx.AsyncClient(base_url=url, timeout=2) as http:
            await status_within(http, made["secret"], 200, 2)
            await keys(capsys, tmp_path / "cli.yaml", "revoke", "from-cli")
            await status_within(http, made["secret"], 401, 2)   # through the store's change counter


async def test_the_json_is_what_the_admin_api_shows_for_the_record(start_gateway, tmp_path, capsys):
    gw = await start_gateway(config(tmp_path / "data"))
    body = {"id": "svc", "organization_id": "acme", "tier": "gold", "allowed_models": ["demo"],
            "allowed_backends": ["a"], "rate_limit": {"requests_per_minute": 60},
            "budget": {"limit_usd": 50, "period": "month"}, "expires_at": "2099-01-01T00:00:00Z",
            "metadata": {"team": "search"}}
    async with httpx.AsyncClient(base_url=gw.url, timeout=5, headers={"authorization": f"Bearer {ADMIN}"}) as api:
        assert (await api.post("/admin/keys", json=body)).status_code == 201
        assert (await api.post("/admin/keys/svc/rotate", json={"grace_seconds": 600})).status_code == 200
        page = (await api.get("/admin/keys/svc")).json()
        listed = (await api.get("/admin/keys")).json()["keys"]
    shown = await keys(capsys, gw.config_path, "show", "svc")
    assert shown == {name: page[name] for name in shown} and shown["previous_secret"] is not None
    assert set(page) - set(shown) == {"share", "rate_limit", "budget", "organization"}   # the limiter's live view
    cli_listed = (await keys(capsys, gw.config_path, "list"))["keys"]
    assert cli_listed == [{name: api_key[name] for name in cli_key} for cli_key, api_key in zip(
        cli_listed, listed, strict=True)]
