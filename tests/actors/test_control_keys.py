"""Database keys through the admin API, on the embedded default (SQLite under server.data_dir): made,
shown, used, changed, rotated, revoked and deleted while the gateway runs."""

from __future__ import annotations

import logging
import secrets as random_source
from pathlib import Path

import pytest
import trio

from switchyard.actors.control import secrets
from switchyard.actors.control.records import KeyRecord
from switchyard.config.access import ApiKey
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores.control import open_control_store
from switchyard.protocol.stores.control_secret import FILE
from tests.harness import chat, gateway, request

ADMIN = [(b"authorization", b"Bearer admin-token-0123456789")]
CONFIG_KEY = "sk-config-0123456789abcdef"
NOW = 1_900_000_000.0   # the wall clock the tests run the control plane on


def config(data_dir: Path, ledger: str = "sqlite") -> str:
    return f"""
admin: {{token: admin-token-0123456789}}
server: {{data_dir: "{data_dir}"}}
health_checks: {{interval: 1h}}
usage: {{ledger: {ledger}}}
backends:
  - {{name: a, type: simulated, models: [demo], simulation: {{latency: 10ms}}}}
api_keys:
  - {{id: team-config, key: {CONFIG_KEY}}}
"""


def bearer(secret: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {secret}".encode())]


class Wall:
    """The control plane's wall clock, moved by the test."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def app(tmp_path, autojump_clock):
    # A thread's work (the store) finishes before virtual time moves on.
    autojump_clock.autojump_threshold = 0.02
    async with gateway(config(tmp_path)) as app:
        app.runtime.control.clock = wall = Wall()
        app.wall = wall
        yield app


async def create(app, **body) -> dict:
    reply = await request(app, "POST", "/admin/keys", body, ADMIN)
    assert reply.status == 201, reply.body
    return reply.json()


async def call(app, secret: str) -> int:
    return (await request(app, "POST", "/v1/chat/completions", chat(), bearer(secret))).status


async def test_a_created_key_answers_at_once_and_its_secret_is_shown_only_then(app):
    made = await create(app, id="team-db", metadata={"owner": "search"})
    secret = made["secret"]
    assert secrets.check(secret) is secrets.Kind.KEY and made["prefix"] == secret[:12]
    assert (made["source"], made["status"], made["created_by"]) == ("database", "active", "admin")
    assert await call(app, secret) == 200
    shown = await request(app, "GET", "/admin/keys/team-db", None, ADMIN)
    listed = await request(app, "GET", "/admin/keys", None, ADMIN)
    assert secret not in shown.body.decode() and secret not in listed.body.decode()
    assert shown.json()["metadata"] == {"owner": "search"}


async def test_a_secret_of_the_shape_with_a_wrong_checksum_is_refused_without_a_lookup(app):
    secret = (await create(app))["secret"]
    typo = secret[:20] + ("a" if secret[20] != "a" else "b") + secret[21:]
    before = app.runtime.control.lookups
    reply = await request(app, "POST", "/v1/chat/completions", chat(), bearer(typo))
    assert reply.status == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    assert app.runtime.control.lookups == before


async def test_a_revoked_key_is_refused_at_once_with_key_revoked(app):
    made = await create(app, id="leaked")
    assert (await request(app, "POST", "/admin/keys/leaked/revoke", None, ADMIN)).json()["status"] == "revoked"
    reply = await request(app, "POST", "/v1/chat/completions", chat(), bearer(made["secret"]))
    assert reply.status == 401 and reply.json()["error"]["code"] == "key_revoked"


async def test_an_expired_key_is_refused_with_key_expired(app):
    made = await create(app, expires_at=NOW + 60)
    assert await call(app, made["secret"]) == 200
    app.wall.now = NOW + 60
    reply = await request(app, "POST", "/v1/chat/completions", chat(), bearer(made["secret"]))
    assert reply.status == 401 and reply.json()["error"]["code"] == "key_expired"


async def test_a_rotated_keys_old_secret_works_for_its_grace_then_stops(app):
    old = (await create(app, id="svc"))["secret"]
    rotated = await request(app, "POST", "/admin/keys/svc/rotate", {"grace_seconds": 300}, ADMIN)
    new = rotated.json()["secret"]
    assert new != old and rotated.json()["previous_secret"]["prefix"] == old[:12]
    assert (await call(app, old), await call(app, new)) == (200, 200)
    app.wall.now = NOW + 300
    reply = await request(app, "POST", "/v1/chat/completions", chat(), bearer(old))
    assert reply.status == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    assert await call(app, new) == 200


async def test_a_change_applies_to_the_next_call(app):
    made = await create(app, id="narrow", allowed_models=["other-*"])
    assert await call(app, made["secret"]) == 403
    reply = await request(app, "PATCH", "/admin/keys/narrow", {"allowed_models": None}, ADMIN)
    assert reply.status == 200 and reply.json()["settings"]["allowed_models"] is None
    assert await call(app, made["secret"]) == 200


async def test_a_deleted_key_is_unknown(app):
    made = await create(app, id="gone")
    assert (await request(app, "DELETE", "/admin/keys/gone", None, ADMIN)).status == 200
    reply = await request(app, "POST", "/v1/chat/completions", chat(), bearer(made["secret"]))
    assert reply.status == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    assert (await request(app, "GET", "/admin/keys/gone", None, ADMIN)).status == 404


async def test_config_keys_are_listed_read_only_and_their_ids_stay_theirs(app):
    listed = (await request(app, "GET", "/admin/keys?source=config", None, ADMIN)).json()["keys"]
    assert [(k["id"], k["source"], k["read_only"]) for k in listed] == [("team-config", "config", True)]
    patched = await request(app, "PATCH", "/admin/keys/team-config", {"tier": "gold"}, ADMIN)
    assert patched.status == 403 and patched.json()["error"]["code"] == "key_read_only"
    taken = await request(app, "POST", "/admin/keys", {"id": "team-config"}, ADMIN)
    assert taken.status == 409 and taken.json()["error"]["param"] == "body.id"
    assert await call(app, CONFIG_KEY) == 200


async def test_the_list_pages_by_id_and_filters(app):
    for name in ("k-c", "k-a", "k-b"):
        await create(app, id=name, organization_id="acme" if name != "k-b" else None)
    await request(app, "POST", "/admin/keys/k-c/revoke", None, ADMIN)
    first = (await request(app, "GET", "/admin/keys?source=database&limit=2", None, ADMIN)).json()
    assert [k["id"] for k in first["keys"]] == ["k-a", "k-b"] and first["next"]
    rest = (await request(app, "GET", f"/admin/keys?source=database&limit=2&after={first['next']}", None,
                          ADMIN)).json()
    assert [k["id"] for k in rest["keys"]] == ["k-c"] and rest["next"] is None
    active_acme = (await request(app, "GET", "/admin/keys?organization_id=acme&status=active", None, ADMIN)).json()
    assert [k["id"] for k in active_acme["keys"]] == ["k-a"]


async def test_a_bad_body_names_every_field_path_and_rule(app):
    reply = await request(app, "POST", "/admin/keys",
                          {"rate_limit": {"requests_per_minute": 0}, "colour": "red"}, ADMIN)
    error = reply.json()["error"]
    assert reply.status == 400 and error["param"] == "body.rate_limit.requests_per_minute"
    assert error["message"] == "body.rate_limit.requests_per_minute: must be at least 1, got 0 (and 1 more)"
    assert [(e["path"], e["message"]) for e in error["details"]["errors"]] == [
        ("body.rate_limit.requests_per_minute", "must be at least 1, got 0"), ("body.colour", "unknown field")]


async def test_a_database_keys_rate_limit_holds_with_no_limits_in_the_config(app):
    made = await create(app, rate_limit={"requests_per_minute": 1})
    assert await call(app, made["secret"]) == 200
    reply = await request(app, "POST", "/v1/chat/completions", chat(), bearer(made["secret"]))
    assert reply.status == 429 and reply.json()["error"]["code"] == "rate_limit_exceeded"


async def test_with_two_workers_and_no_redis_a_limited_key_is_refused(app):
    app.runtime.workers = 2
    reply = await request(app, "POST", "/admin/keys", {"budget": {"limit_usd": 5.0}}, ADMIN)
    assert reply.status == 400 and reply.json()["error"]["code"] == "limits_need_redis"
    assert (await request(app, "POST", "/admin/keys", {"tier": "gold"}, ADMIN)).status == 201


async def test_a_key_may_name_only_backends_the_config_has(app):
    reply = await request(app, "POST", "/admin/keys", {"allowed_backends": ["a", "b"]}, ADMIN)
    error = reply.json()["error"]
    assert reply.status == 400 and error["param"] == "body.allowed_backends[1]"
    assert error["message"] == "body.allowed_backends[1]: no backend is named 'b'"


async def written_elsewhere(tmp_path: Path, key_id: str) -> str:
    """A key made by another instance (here a second store on the same file), not in the view yet: its secret."""
    other = open_control_store(UsageConfig(), tmp_path)
    await trio.to_thread.run_sync(other.open)
    secret = secrets.make(random_source.token_bytes(32))
    server_secret = (tmp_path / FILE).read_text().strip().encode()
    record = KeyRecord(key=ApiKey(id=key_id, key=""), prefix=secrets.public_prefix(secret),
                       digest=secrets.digest(secret.encode(), server_secret), created_at=NOW, updated_at=NOW)
    await trio.to_thread.run_sync(other.insert, record)
    await trio.to_thread.run_sync(other.close)
    return secret


async def test_a_key_written_by_another_instance_answers_at_its_first_call(app, tmp_path):
    """Another instance made the key a moment ago: the first call with it asks the store, once, and is
    answered."""
    secret = await written_elsewhere(tmp_path, "elsewhere")
    assert await call(app, secret) == 200
    await trio.sleep(1)   # and the next poll of the change counter brings it into the view
    assert "elsewhere" in app.runtime.control.view.records


async def test_an_unknown_secret_of_the_shape_is_asked_of_the_store_once_a_second(app):
    await create(app)   # the data plane asks for keys
    stranger = secrets.make(b"\x01" * 32)
    before = app.runtime.control.lookups
    for _ in range(3):
        assert (await request(app, "POST", "/v1/chat/completions", chat(), bearer(stranger))).status == 401
    assert app.runtime.control.lookups == before + 1


async def test_last_use_is_written_off_the_request_path(app, autojump_clock):
    made = await create(app, id="used")
    assert await call(app, made["secret"]) == 200
    assert app.runtime.control.view.records["used"].last_used_at is None
    await app.runtime.control.touch()
    await app.runtime.control.reload()
    assert app.runtime.control.view.records["used"].last_used_at == NOW


async def test_v1_key_shows_the_asking_key_and_no_other(app):
    made = await create(app, id="mine", budget={"limit_usd": 5.0, "period": "month"})
    await create(app, id="theirs")
    reply = await request(app, "GET", "/v1/key", None, bearer(made["secret"]))
    data = reply.json()["data"]
    assert reply.status == 200 and (data["label"], data["limit"], data["source"]) == ("mine", 5.0, "database")
    assert data["limit_remaining"] == 5.0 and "theirs" not in reply.body.decode()
    config_key = (await request(app, "GET", "/v1/key", None, bearer(CONFIG_KEY))).json()["data"]
    assert (config_key["label"], config_key["source"], config_key["limit"]) == ("team-config", "config", None)


async def test_v1_key_shows_a_key_made_elsewhere_as_the_database_key_it_is_before_the_view_holds_it(app, tmp_path):
    """Judged by the store's record (the view reloads after the answer), not shown as a config key."""
    secret = await written_elsewhere(tmp_path, "elsewhere")
    reply = await request(app, "GET", "/v1/key", None, bearer(secret))
    data = reply.json()["data"]
    assert reply.status == 200 and (data["id"], data["source"], data["prefix"]) == ("elsewhere", "database",
                                                                                     secret[:12])


async def test_with_a_memory_ledger_changes_are_refused_naming_why(tmp_path, autojump_clock):
    async with gateway(config(tmp_path, ledger="memory")) as app:
        reply = await request(app, "POST", "/admin/keys", {}, ADMIN)
        error = reply.json()["error"]
        assert reply.status == 503 and error["code"] == "control_plane_unavailable"
        assert "usage.ledger is memory" in error["message"]


async def test_a_reload_cannot_give_a_config_key_a_database_keys_id(app, tmp_path):
    await create(app, id="shared-id")
    path = tmp_path / "switchyard.yaml"
    path.write_text(config(tmp_path) + "  - {id: shared-id, key: sk-another-0123456789abcdef}\n")
    app.runtime.config_path = path
    result = app.runtime.reload_from_file("test")
    assert result["result"] == "rejected" and "api_keys[1].id" in result["errors"][0]



async def test_failed_keys_from_one_address_past_five_a_minute_wait_one_after_another(app):
    wrong = bearer("sk-wrong-0123456789abcdef")
    here, there = ("10.0.0.7", 5000), ("10.0.0.8", 5000)
    for _ in range(5):
        start = trio.current_time()
        assert (await request(app, "POST", "/v1/chat/completions", chat(), wrong, client=here)).status == 401
        assert trio.current_time() - start < 0.1   # a stale key's error at once
    ends = []

    async def guess() -> None:
        await request(app, "POST", "/v1/chat/completions", chat(), wrong, client=here)
        ends.append(trio.current_time() - start)

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(guess)
    assert sorted(ends) == pytest.approx([1.0, 2.0, 3.0], abs=0.1)
    start = trio.current_time()   # another address, and a valid key from the slowed one, answer at once
    assert (await request(app, "POST", "/v1/chat/completions", chat(), wrong, client=there)).status == 401
    valid = await request(app, "POST", "/v1/chat/completions", chat(), bearer(CONFIG_KEY), client=here)
    assert valid.status == 200 and trio.current_time() - start < 0.1


async def test_the_control_planes_counters_are_exported(app):
    await create(app)
    text = (await request(app, "GET", "/metrics")).body.decode()
    assert "control_plane_store_up 1.0" in text and "control_plane_keys 1.0" in text
    assert "control_plane_reloads_total" in text and "control_plane_lookups_total 0.0" in text


async def test_a_secret_never_reaches_a_log_line(app, caplog):
    caplog.set_level(logging.DEBUG)
    made = await create(app, id="quiet")
    await call(app, made["secret"])
    await request(app, "POST", "/admin/keys/quiet/revoke", None, ADMIN)
    await call(app, made["secret"])
    rotated = (await request(app, "POST", "/admin/keys", {"id": "other"}, ADMIN)).json()["secret"]
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert text and made["secret"] not in text and rotated not in text
