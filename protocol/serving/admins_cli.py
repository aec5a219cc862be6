"""``switchyard admins create|list|update|rotate|disable|delete``: administrators' accounts from the command line.

As ``switchyard keys`` (``keys_cli.py``): on the store the config names, with
the gateway's server secret, through the admin API's own changes
(``actors/control/admins.py``), audited as ``cli:<user>``. It is how the
first administrator is made on a machine whose config sets no
``admin.token``: the admin API is served once the database holds an
account. ``create`` and ``rotate`` print the token, once.

Exit status: 0 done; 1 refused (a bad option, no such account, a
conflict); 2 the store cannot be reached or used. Messages go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Awaitable, Callable, TextIO

import trio

from switchyard.actors.control.admins import AdminChanges
from switchyard.actors.control.keys import Actor
from switchyard.actors.control.plane import ControlPlane
from switchyard.actors.control.records import ROLES
from switchyard.actors.control.shown import admin_json
from switchyard.config.key_body import admin_body
from switchyard.config.schema import Snapshot
from switchyard.protocol.serving.keys_cli import REFUSED, created_by, on_store, run_command

PROG = "switchyard admins"
COLUMNS = ("id", "role", "status", "prefix", "created_by", "created_at")
# (the work on the open control plane, whether it only reads)
Work = tuple[Callable[[ControlPlane, AdminChanges], Awaitable[Any]], bool]


def add_parser(sub: Any) -> None:
    admins = sub.add_parser("admins", help="administrators' accounts of the admin API: made, listed, changed, "
                                           "rotated, disabled, deleted on the store the config names")
    admins.usage_exit = REFUSED
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH",
                        help="config file whose usage.ledger holds the accounts (default: the embedded demo config)")
    common.add_argument("--json", action="store_true", help="print the admin API's JSON for the account(s)")
    commands = admins.add_subparsers(dest="admins_command", required=True, metavar="COMMAND")

    def command(name: str, help: str, role: bool = False) -> Any:
        parser = commands.add_parser(name, help=help, parents=[common], description=help)
        parser.usage_exit = REFUSED
        parser.set_defaults(usage_parser=parser)
        if name != "list":
            parser.add_argument("admin_id", metavar="ID", help="the account's id")
        if role:
            parser.add_argument("--role", required=True, choices=ROLES,
                                help="admin: everything; operator: keys, organizations, reloads and reading; "
                                     "viewer: reading")
        return parser

    command("create", "make an account; its token is printed this once", role=True)
    command("list", "every account, by id")
    command("update", "give an account another role", role=True)
    command("rotate", "a new token, printed this once; the old one stops at once")
    command("disable", "refuse the account's token and console sessions from now on (it stays listed)")
    command("delete", "forget the account")


def admins_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    prog = f"{PROG} {args.admins_command}"

    def run(snapshot: Snapshot) -> Any:
        work, reading = _work(args)
        return trio.run(_on_store, snapshot, work, reading, prog)
    status, doc = run_command(prog, args.config, run,
                              lambda path: "ID" if path == "body.id" else path.replace("body.", "--", 1))
    if status == 0:
        _write(out or sys.stdout, prog, args.json, doc)
    return status


async def _on_store(snapshot: Snapshot, work: Callable[..., Awaitable[Any]], reading: bool, prog: str) -> Any:
    token_set = snapshot.admin.token is not None

    async def with_changes(plane: ControlPlane) -> Any:
        return await work(plane, AdminChanges(plane, lambda: token_set, clock=plane.clock,
                                              actor=Actor(created_by(), None)))   # audited as the CLI's user
    return await on_store(snapshot, with_changes, reading, prog, "administrators' accounts")


def _work(args: argparse.Namespace) -> Work:
    """The work of the command, its options read first (by the API's body rules)."""
    name = args.admins_command
    if name == "create":
        body = admin_body({"id": args.admin_id, "role": args.role}, patch=False)

        async def create(plane: ControlPlane, changes: AdminChanges) -> dict[str, Any]:
            assert body.id is not None
            record, token = await changes.create(body.id, body.role)
            return {**admin_json(record), "token": token}
        return create, False
    if name == "list":
        async def listed(plane: ControlPlane, changes: AdminChanges) -> dict[str, Any]:
            return {"admins": [admin_json(plane.view.admins[i]) for i in sorted(plane.view.admins)]}
        return listed, True
    if name == "update":
        async def update(plane: ControlPlane, changes: AdminChanges) -> dict[str, Any]:
            return admin_json(await changes.update(args.admin_id, args.role))
        return update, False
    if name == "rotate":
        async def rotate(plane: ControlPlane, changes: AdminChanges) -> dict[str, Any]:
            record, token = await changes.rotate(args.admin_id)
            return {**admin_json(record), "token": token}
        return rotate, False
    if name == "disable":
        async def disable(plane: ControlPlane, changes: AdminChanges) -> dict[str, Any]:
            return admin_json(await changes.disable(args.admin_id))
        return disable, False

    async def delete(plane: ControlPlane, changes: AdminChanges) -> dict[str, Any]:
        await changes.delete(args.admin_id)
        return {"id": args.admin_id, "deleted": True}
    return delete, False


def _write(out: TextIO, prog: str, as_json: bool, doc: dict[str, Any]) -> None:
    if as_json:
        print(json.dumps(doc, indent=2, ensure_ascii=False), file=out)
    elif "admins" in doc:
        rows = [list(COLUMNS), *([str(a.get(c) or "-") for c in COLUMNS] for a in doc["admins"])]
        if len(rows) == 1:
            out.write("(no administrators)\n")
            return
        widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
        out.write("".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
                          for row in rows))
    elif doc.get("deleted"):
        print(f"deleted administrator {doc['id']!r}", file=out)
    else:
        width = max(len(name) for name in doc)
        out.write("".join(f"{name.ljust(width)}  {'-' if value is None else value}\n" for name, value in doc.items()))
        if "token" in doc:
            print(f"{prog}: the token is shown this once: keep it now (only its digest is stored)", file=sys.stderr)
