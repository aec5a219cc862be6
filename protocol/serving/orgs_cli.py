"""``switchyard orgs create|list|show|update|delete``: organizations kept in the database, from the command line.

As ``switchyard keys`` (``keys_cli.py``): on the store the config names,
through the admin API's own changes (``actors/control/organizations.py``)
and body rules (``config/key_body.py``), audited as ``cli:<user>``; a
running gateway picks a change up through the change counter. ``--json``
prints the admin API's JSON for the organization(s).

Exit status: 0 done; 1 refused (a bad option, no such organization, a
conflict); 2 the store cannot be reached or used. Messages go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Awaitable, Callable, TextIO

import trio

from switchyard.actors.control.keys import Actor
from switchyard.actors.control.organizations import OrgChanges
from switchyard.actors.control.plane import ControlPlane
from switchyard.config.key_body import KeyBodyError, org_body
from switchyard.config.schema import Snapshot
from switchyard.protocol.admin.organizations import org_json
from switchyard.protocol.serving.keys_cli import REFUSED, created_by, on_store, run_command
from switchyard.protocol.serving.keys_flags import flag_path, pairs

PROG = "switchyard orgs"
CLEARABLE = {"rate-limit": "rate_limit", "rate_limit": "rate_limit", "budget": "budget", "label": "metadata",
             "metadata": "metadata", "allowed-mcp-server": "allowed_mcp_servers",
             "allowed_mcp_servers": "allowed_mcp_servers", "allowed-mcp-tool": "allowed_mcp_tools",
             "allowed_mcp_tools": "allowed_mcp_tools"}
Work = tuple[Callable[[ControlPlane, OrgChanges], Awaitable[Any]], bool]   # the work, whether it only reads


def add_parser(sub: Any) -> None:
    orgs = sub.add_parser("orgs", help="organizations (shared budgets and rate limits): made, listed, changed and "
                                       "deleted on the store the config names")
    orgs.usage_exit = REFUSED
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH",
                        help="config file whose usage.ledger holds them (default: the embedded demo config)")
    common.add_argument("--json", action="store_true", help="print the admin API's JSON")
    commands = orgs.add_subparsers(dest="orgs_command", required=True, metavar="COMMAND")

    def command(name: str, help: str, fields: bool = False) -> Any:
        parser = commands.add_parser(name, help=help, parents=[common], description=help)
        parser.usage_exit = REFUSED
        parser.set_defaults(usage_parser=parser)
        if name != "list":
            parser.add_argument("org_id", metavar="ID", help="the organization's id")
        if fields:
            parser.add_argument("--rate-limit", action="append", metavar="NAME=VALUE[,...]",
                                help="shared by its keys: e.g. requests_per_minute=600 (replaces the whole limit)")
            parser.add_argument("--budget", action="append", metavar="NAME=VALUE[,...]",
                                help="shared by its keys: e.g. limit_usd=500,period=month (replaces the whole budget)")
            parser.add_argument("--allowed-mcp-server", action="append", metavar="GLOB",
                                help="an MCP server name or glob its keys may reach; repeat for more "
                                     "(none: every server; given, replaces its list)")
            parser.add_argument("--allowed-mcp-tool", action="append", metavar="GLOB",
                                help="a tool name or glob (<server>__<tool>) its keys may list and call; repeat "
                                     "for more (none: every tool; given, replaces its list)")
            parser.add_argument("--label", action="append", metavar="NAME=VALUE",
                                help="a free-form label; repeat for more (the labels given replace its labels)")
        if name == "update":
            parser.add_argument("--clear", action="append", metavar="FIELD",
                                help="set a field to none: rate-limit, budget, allowed-mcp-server, "
                                     "allowed-mcp-tool or label")
        return parser

    command("create", "make an organization", fields=True)
    command("list", "every organization: the config's, then the database's by id")
    command("show", "one organization")
    command("update", "change the fields given", fields=True)
    command("delete", "forget an organization (refused while database keys name it)")


def orgs_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    prog = f"{PROG} {args.orgs_command}"

    def run(snapshot: Snapshot) -> Any:
        work, reading = _work(args, snapshot)
        return trio.run(_on_store, snapshot, work, reading, prog)
    status, doc = run_command(prog, args.config, run, lambda path: "ID" if path == "body.id" else flag_path(path))
    if status == 0:
        _write(out or sys.stdout, args.json, doc)
    return status


async def _on_store(snapshot: Snapshot, work: Callable[..., Awaitable[Any]], reading: bool, prog: str) -> Any:
    config_ids = frozenset(snapshot.organizations)

    async def with_changes(plane: ControlPlane) -> Any:
        return await work(plane, OrgChanges(plane, lambda: config_ids, clock=plane.clock,
                                            actor=Actor(created_by(), None)))   # audited as the CLI's user
    return await on_store(snapshot, with_changes, reading, prog, "organizations")


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for field, globs in (("allowed_mcp_servers", args.allowed_mcp_server),
                         ("allowed_mcp_tools", args.allowed_mcp_tool)):
        if globs is not None:
            body[field] = globs
    for field, texts, as_text in (("rate_limit", args.rate_limit, False), ("budget", args.budget, False),
                                  ("metadata", args.label, True)):
        if texts is not None:
            body[field] = pairs(field, texts, as_text, problems)
    for name in getattr(args, "clear", None) or ():
        cleared = CLEARABLE.get(name)
        if cleared is None:
            problems.append(("--clear", f"has no field {name!r}: one of rate-limit, budget, allowed-mcp-server, "
                                        f"allowed-mcp-tool, label"))
        elif cleared in body:
            problems.append((f"--clear {name}", "cannot be given with the field's own option"))
        else:
            body[cleared] = None
    if problems:
        raise KeyBodyError(problems)
    return body


def _work(args: argparse.Namespace, snapshot: Snapshot) -> Work:
    """The work of the command, its options read first (by the API's body rules)."""
    name = args.orgs_command
    if name == "list":
        async def listed(plane: ControlPlane, changes: OrgChanges) -> dict[str, Any]:
            records = plane.view.organizations
            return {"organizations": [*(org_json(o, None) for o in snapshot.organizations.values()),
                                      *(org_json(records[i].organization, records[i]) for i in sorted(records))]}
        return listed, True
    if name == "show":
        async def show(plane: ControlPlane, changes: OrgChanges) -> dict[str, Any]:
            config = snapshot.organizations.get(args.org_id)
            if config is not None:
                return org_json(config, None)
            record = changes.record(args.org_id)
            return org_json(record.organization, record)
        return show, True
    if name == "delete":
        async def delete(plane: ControlPlane, changes: OrgChanges) -> dict[str, Any]:
            await changes.delete(args.org_id)
            return {"id": args.org_id, "deleted": True}
        return delete, False
    if name == "create":
        body = org_body({"id": args.org_id, **_body(args)}, patch=False)

        async def create(plane: ControlPlane, changes: OrgChanges) -> dict[str, Any]:
            assert body.id is not None
            record = await changes.create(body.id, body.changes(), created_by())
            return org_json(record.organization, record)
        return create, False
    given = _body(args)
    if not given:
        raise KeyBodyError([("", "nothing to change: give a field's option or --clear FIELD")])
    changes_given = org_body(given, patch=True).changes()

    async def update(plane: ControlPlane, changes: OrgChanges) -> dict[str, Any]:
        record = await changes.update(args.org_id, changes_given)
        return org_json(record.organization, record)
    return update, False


def _write(out: TextIO, as_json: bool, doc: dict[str, Any]) -> None:
    if as_json:
        print(json.dumps(doc, indent=2, ensure_ascii=False), file=out)
    elif "organizations" in doc:
        if not doc["organizations"]:
            out.write("(no organizations)\n")
        for org in doc["organizations"]:
            budget = org.get("budget") or {}
            shown = f"{budget.get('limit_usd')} USD/{budget.get('period')}" if budget else "-"
            out.write(f"{org['id']}  {org['source']}  budget {shown}\n")
    elif doc.get("deleted"):
        print(f"deleted organization {doc['id']!r}", file=out)
    else:
        width = max(len(name) for name in doc)
        out.write("".join(f"{name.ljust(width)}  {'-' if value is None else value}\n" for name, value in doc.items()))
