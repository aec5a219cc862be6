"""Administrators' accounts: each has its own token and a role, is managed through /admin/admins, audited by
its id, and logs in to the console; a role that may not make a request gets 403 admin_role_forbidden."""

from __future__ import annotations

import json
import re

import pytest

from switchyard.actors.control import secrets
from switchyard.actors.control.admins import AdminChanges
from switchyard.actors.control.keys import Actor
from switchyard.actors.control.records import ROLES
from switchyard.protocol.admin import roles, session
from tests.actors.test_control_keys import ADMIN, Wall, bearer, config
from tests.harness import gateway, request

CLIENT = ("10.1.2.3", 40000)
FORM = [(b"content-type", b"application/x-www-form-urlencoded")]


@pytest.fixture
async def app(tmp_path, autojump_clock):
    autojump_clock.autojump_threshold = 0.02   # a thread's work (the store) ends before virtual time moves on
    async with gateway(config(tmp_path)) as app:
        app.runtime.control.clock = Wall()
        yield app


async def make(app, admin_id: str, role: str) -> dict:
    reply = await request(app, "POST", "/admin/admins", {"id": admin_id, "role": role}, ADMIN)
    assert reply.status == 201, reply.body
    return reply.json()


async def as_(app, token: str, method: str, path: str, body: dict | None = None):
    return await request(app, method, path, body, bearer(token), client=CLIENT)


def error(reply) -> dict:
    return reply.json()["error"]


async def login(app, token: str) -> str:
    reply = await request(app, "POST", "/admin/ui/login", f"token={token}&next=usage".encode(), FORM)
    assert reply.status == 303, reply.body
    found = re.match(rf"{session.COOKIE}=([^;]*)", reply.headers[b"set-cookie"].decode())
    assert found is not None
    return found.group(1)


def cookie(value: str, *more: tuple[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return [(b"cookie", f"{session.COOKIE}={value}".encode()), *more]


async def test_an_accounts_token_is_shown_once_kept_as_a_digest_and_opens_the_admin_api(app):
    made = await make(app, "ops", "operator")
    token = made["token"]
    assert secrets.check(token) is secrets.Kind.ADMIN and made["prefix"] == token[:12]
    assert (made["role"], made["status"], made["created_by"]) == ("operator", "active", "admin")
    record = app.runtime.control.view.admins["ops"]
    assert record.digest == app.runtime.control.admin_digest(token.encode()) != token.encode()
    listed = await request(app, "GET", "/admin/admins", None, ADMIN)
    assert token not in listed.body.decode() and [a["id"] for a in listed.json()["admins"]] == ["ops"]
    assert (await as_(app, token, "GET", "/admin/backends")).status == 200
    mistyped = token[:-1] + ("y" if token.endswith("x") else "x")   # one character changed, whatever it was
    assert (await as_(app, mistyped, "GET", "/admin/backends")).status == 401   # its checksum fails


async def test_a_viewer_reads_and_is_refused_every_change_naming_its_role_and_the_action(app):
    token = (await make(app, "eve", "viewer"))["token"]
    assert (await as_(app, token, "GET", "/admin/keys")).status == 200
    refused = await as_(app, token, "POST", "/admin/keys", {"id": "k1"})
    assert refused.status == 403 and error(refused)["code"] == "admin_role_forbidden"
    assert error(refused)["message"] == "The role 'viewer' may not change keys (POST /admin/keys)"
    assert (await as_(app, token, "POST", "/admin/config/reload")).status == 403
    assert "k1" not in app.runtime.control.view.records


async def test_an_operator_changes_keys_organizations_and_reloads_but_nothing_else(app):
    token = (await make(app, "ops", "operator"))["token"]
    assert (await as_(app, token, "POST", "/admin/keys", {"id": "k1"})).status == 201
    assert (await as_(app, token, "POST", "/admin/organizations", {"id": "acme"})).status == 201
    assert (await as_(app, token, "POST", "/admin/config/reload")).status != 403   # past the role check
    policies = await as_(app, token, "PUT", "/admin/smart-routing/policies", {})
    assert policies.status == 403 and "change smart routing" in error(policies)["message"]
    listing = await as_(app, token, "GET", "/admin/admins")
    assert listing.status == 403 and error(listing)["message"] == (
        "The role 'operator' may not read administrators (GET /admin/admins)")


def test_every_admin_route_is_classified_by_method_and_path():
    assert roles.rule("GET", "/admin/usage")[0] == ROLES
    assert roles.rule("POST", "/admin/smart-routing/simulate")[0] == ROLES   # a read
    assert roles.rule("DELETE", "/admin/keys/k1")[0] == ("admin", "operator")
    assert roles.rule("PATCH", "/admin/organizations/acme")[0] == ("admin", "operator")
    assert roles.rule("POST", "/admin/config/prompts/reload")[0] == ("admin", "operator")
    assert roles.rule("PUT", "/admin/config/prompts/system.md")[0] == ("admin",)
    assert roles.rule("GET", "/admin/admins/ops")[0] == ("admin",)


async def test_an_admin_role_account_manages_administrators(app):
    token = (await make(app, "root", "admin"))["token"]
    made = await as_(app, token, "POST", "/admin/admins", {"id": "eve", "role": "viewer"})
    assert made.status == 201 and made.json()["created_by"] == "root"
    changed = await as_(app, token, "PATCH", "/admin/admins/eve", {"role": "operator"})
    assert changed.status == 200 and changed.json()["role"] == "operator"
    assert app.runtime.control.view.admins["eve"].role == "operator"
    assert (await as_(app, token, "DELETE", "/admin/admins/eve")).status == 200
    assert (await as_(app, token, "GET", "/admin/admins/eve")).status == 404


async def test_a_disabled_accounts_token_stops_at_once(app):
    token = (await make(app, "ops", "operator"))["token"]
    disabled = await request(app, "POST", "/admin/admins/ops/disable", None, ADMIN)
    assert disabled.status == 200 and disabled.json()["status"] == "disabled"
    assert (await as_(app, token, "GET", "/admin/backends")).status == 401


async def test_a_rotated_token_replaces_the_old_one_at_once(app):
    old = (await make(app, "ops", "operator"))["token"]
    rotated = (await request(app, "POST", "/admin/admins/ops/rotate", None, ADMIN)).json()
    assert rotated["prefix"] == rotated["token"][:12] != old[:12]
    assert (await as_(app, old, "GET", "/admin/backends")).status == 401
    assert (await as_(app, rotated["token"], "GET", "/admin/backends")).status == 200


async def test_changes_are_audited_under_the_accounts_id_and_never_show_a_token(app):
    root = (await make(app, "root", "admin"))["token"]
    made = (await as_(app, root, "POST", "/admin/admins", {"id": "ops", "role": "viewer"})).json()
    await as_(app, root, "PATCH", "/admin/admins/ops", {"role": "operator"})
    rotated = (await as_(app, root, "POST", "/admin/admins/ops/rotate")).json()
    key = (await as_(app, rotated["token"], "POST", "/admin/keys", {"id": "k1"})).json()
    await as_(app, root, "POST", "/admin/admins/ops/disable")
    await as_(app, root, "DELETE", "/admin/admins/ops")
    log = (await request(app, "GET", "/admin/audit", None, ADMIN)).json()["entries"]
    assert [(e["actor"], e["action"]) for e in log] == [
        ("root", "admin.delete"), ("root", "admin.disable"), ("ops", "key.create"), ("root", "admin.rotate"),
        ("root", "admin.update"), ("root", "admin.create"), ("admin", "admin.create")]
    assert key["created_by"] == "ops" and log[0]["address"] == "10.1.2.3"
    text = json.dumps(log)
    assert root not in text and made["token"] not in text and rotated["token"] not in text


async def test_a_bad_account_body_names_its_paths_and_reserved_ids_are_refused(app):
    bad = await request(app, "POST", "/admin/admins", {"id": "x y", "role": "root"}, ADMIN)
    assert bad.status == 400 and [e["path"] for e in error(bad)["details"]["errors"]] == ["body.id", "body.role"]
    for taken in ("admin", "cli:root"):
        refused = await request(app, "POST", "/admin/admins", {"id": taken, "role": "viewer"}, ADMIN)
        assert refused.status == 409 and error(refused)["param"] == "body.id"


def no_token_config(tmp_path) -> str:
    return config(tmp_path).replace("admin: {token: admin-token-0123456789}\n", "")


async def test_without_admin_token_the_api_is_served_once_the_database_holds_an_account(tmp_path, autojump_clock):
    autojump_clock.autojump_threshold = 0.02
    async with gateway(no_token_config(tmp_path)) as app:
        assert (await request(app, "GET", "/admin/backends", None, ADMIN)).status == 404
        changes = AdminChanges(app.runtime.control, lambda: False, clock=Wall(), actor=Actor("cli:root"))
        _, token = await changes.create("root", "admin")
        assert (await request(app, "GET", "/admin/backends", None, ADMIN)).status == 401
        assert (await as_(app, token, "GET", "/admin/backends")).status == 200
        # the last enabled admin account is the only way in: it is not disabled, demoted or deleted
        for method, path, body in (("POST", "/admin/admins/root/disable", None),
                                   ("PATCH", "/admin/admins/root", {"role": "viewer"}),
                                   ("DELETE", "/admin/admins/root", None)):
            assert (await as_(app, token, method, path, body)).status == 409
        assert (await as_(app, token, "GET", "/admin/backends")).status == 200


async def test_the_console_logs_an_account_in_and_a_viewers_session_cannot_change(app):
    token = (await make(app, "eve", "viewer"))["token"]
    value = await login(app, token)
    assert token not in value and value.split(".")[1] == "eve"
    page = await request(app, "GET", "/admin/ui/usage", headers=cookie(value))
    assert page.status == 200
    csrf = re.search(rb'name="csrf-token" content="([0-9a-f]{64})"', page.body).group(1)
    assert (await request(app, "GET", "/admin/keys", headers=cookie(value))).status == 200
    refused = await request(app, "POST", "/admin/keys", {"id": "k1"}, cookie(value, (b"x-csrf-token", csrf)))
    assert refused.status == 403 and error(refused)["code"] == "admin_role_forbidden"


async def test_whoami_names_the_caller_and_its_role_to_every_role(app):
    token = (await make(app, "eve", "viewer"))["token"]
    assert (await as_(app, token, "GET", "/admin/whoami")).json() == {"id": "eve", "role": "viewer"}
    assert (await request(app, "GET", "/admin/whoami", None, ADMIN)).json() == {"id": "admin", "role": "admin"}
    value = await login(app, token)
    assert (await request(app, "GET", "/admin/whoami", headers=cookie(value))).json()["role"] == "viewer"
    assert roles.rule("GET", "/admin/whoami")[0] == ROLES


async def test_a_console_page_is_rendered_with_the_sessions_role(app):
    value = await login(app, (await make(app, "ops", "operator"))["token"])
    page = await request(app, "GET", "/admin/ui/keys", headers=cookie(value))
    assert page.status == 200 and b'data-page="keys" data-role="operator"' in page.body


async def test_a_disabled_or_rotated_accounts_session_ends_at_its_next_request(app):
    for admin_id, change in (("ops", "disable"), ("dev", "rotate")):
        value = await login(app, (await make(app, admin_id, "operator"))["token"])
        assert (await request(app, "GET", "/admin/backends", headers=cookie(value))).status == 200
        await request(app, "POST", f"/admin/admins/{admin_id}/{change}", None, ADMIN)
        assert (await request(app, "GET", "/admin/backends", headers=cookie(value))).status == 401
        assert (await request(app, "GET", "/admin/ui/usage", headers=cookie(value))).status == 303


async def test_a_session_cannot_be_moved_to_another_account(app):
    value = await login(app, (await make(app, "eve", "viewer"))["token"])
    await make(app, "root", "admin")
    expires, _, mac = value.split(".")
    forged = f"{expires}.root.{mac}"
    assert (await request(app, "GET", "/admin/backends", headers=cookie(forged))).status == 401
