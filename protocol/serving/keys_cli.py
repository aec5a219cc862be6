"""``switchyard keys create|list|show|update|rotate|revoke|delete``: database keys from the command line.

It works on the store the config names (the SQLite file under
``server.data_dir``, or the PostgreSQL database of a fleet), with the
server secret the gateway uses, so the first key can be made on a new
machine before the gateway ever ran, and a key made while it runs reaches
every worker through the store's change counter, as the admin API's changes
do. The changes are the admin API's own (``actors/control/keys.py``), on a
control plane opened for the one command, and the options are read by the
API's body rules (``keys_flags.py``); ``--json`` prints the API's JSON for
the key, less the limiter's live view that only a running gateway holds.

Exit status: 0 done; 1 refused (a bad option, no such key, a conflict, a
config key); 2 the store cannot be reached or used. Messages go to stderr.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import sys
import time
from typing import Any, Awaitable, Callable, TextIO

import trio

from switchyard.actors.control import listing, shown
from switchyard.actors.control.keys import Actor, KeyChanges
from switchyard.actors.control.plane import ControlPlane
from switchyard.actors.errors import ClientError, ControlPlaneUnavailable
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.config.key_body import KeyBodyError, check_backends, create_body, patch_body, rotate_body
from switchyard.config.load import ConfigError, load_demo, load_file
from switchyard.config.schema import Snapshot
from switchyard.protocol.serving import keys_flags
from switchyard.protocol.serving.keys_shown import key_lines, key_table
from switchyard.protocol.stores.control import SqlControlStore, open_control_store
from switchyard.protocol.stores.control_secret import control_secret
from switchyard.protocol.stores.sqlite import SqliteStore

PROG = "switchyard keys"
REFUSED, UNAVAILABLE = 1, 2
# (the work on the open control plane, whether it only reads)
Work = tuple[Callable[[ControlPlane, KeyChanges], Awaitable[Any]], bool]


def add_parser(sub: Any) -> None:
    """``keys`` and its commands under the CLI's subcommands (a command line they cannot read exits 1)."""
    keys = sub.add_parser("keys", help="database API keys: made, listed, changed, rotated, revoked, deleted "
                                       "on the store the config names, while the gateway runs or not")
    keys.usage_exit = REFUSED
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH",
                        help="config file whose usage.ledger holds the keys (default: the embedded demo config, "
                             "as serve)")
    common.add_argument("--json", action="store_true",
                        help="print the admin API's JSON for the key(s), without the limiter's live windows and "
                             "budget use (only the running gateway holds them)")
    commands = keys.add_subparsers(dest="keys_command", required=True, metavar="COMMAND")

    def command(name: str, help: str, key_id: bool = True) -> Any:   # cli.Parser
        parser = commands.add_parser(name, help=help, parents=[common], description=help)
        parser.usage_exit = REFUSED
        parser.set_defaults(usage_parser=parser)
        if key_id:
            parser.add_argument("key_id", metavar="ID", help="the key's id")
        return parser

    create = command("create", "make a key; its secret is printed this once", key_id=False)
    create.add_argument("--id", help="1-128 of A-Z a-z 0-9 . _ : @ - (default: key-<16 hex>); never a config "
                                     "key's id")
    keys_flags.add_field_options(create)
    listed = command("list", "config keys, then database keys by id", key_id=False)
    listed.add_argument("--source", choices=listing.SOURCES, help="only the config's keys or the database's")
    listed.add_argument("--organization-id", metavar="ORG_ID", help="only the keys of this organization")
    listed.add_argument("--status", choices=shown.STATUSES, help="only keys in this status")
    command("show", "one key (a config key or a database key)")
    update = command("update", "change the fields given; the others stay")
    keys_flags.add_field_options(update, update=True)
    update.add_argument("--clear", action="append", metavar="FIELD",
                        help="set a field to none (no limit, every model, ...): organization-id, tier, "
                             "allowed-model, allowed-backend, rate-limit, budget, expires-at or label; repeat "
                             "for more")
    rotate = command("rotate", "a new secret, printed this once")
    rotate.add_argument("--grace", metavar="SECONDS",
                        help="the old secret keeps working this long, 0 to 2592000 (30 days); default 0: it "
                             "stops at once")
    command("revoke", "refuse the key and every secret of it from now on (it stays listed until deleted)")
    command("delete", "forget the key")


def keys_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    prog = f"{PROG} {args.keys_command}"

    def run(snapshot: Snapshot) -> Any:
        work, reading = COMMANDS[args.keys_command](args, snapshot)   # the options read before the store
        return trio.run(_on_store, snapshot, work, reading, prog)
    status, doc = run_command(prog, args.config, run, keys_flags.flag_path)
    if status == 0:
        _write(out or sys.stdout, prog, args.json, doc)
    return status


def run_command(prog: str, config: str | None, run: Callable[[Snapshot], Any], where: Callable[[str], str]
                ) -> tuple[int, Any]:
    """What every control-plane command does around its own work: the config loaded (the embedded demo's
    without ``--config``), then ``run(snapshot)``; the exit status and ``run``'s document. A refusal is said on
    stderr, a body's problem at ``where(path)`` (the option that gave it; "" for none), and a store's failure
    once (the control plane's own log line is silenced)."""
    quiet = logging.getLogger("switchyard.control")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    try:
        loaded = load_file(config) if config else load_demo()
    except ConfigError as exc:
        for error in exc.errors:
            print(f"error: {error}", file=sys.stderr)
        print(f"{exc.source}: {len(exc.errors)} error(s)", file=sys.stderr)
        return REFUSED, None
    try:
        return 0, run(loaded.snapshot)
    except KeyBodyError as exc:
        for path, message in exc.errors:
            place = where(path)
            print(f"{prog}: {place}: {message}" if place else f"{prog}: {message}", file=sys.stderr)
        return REFUSED, None
    except (ControlPlaneUnavailable, StoreUnavailable) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return UNAVAILABLE, None
    except ClientError as exc:
        print(f"{prog}: {exc.message}", file=sys.stderr)
        return REFUSED, None


async def _on_store(snapshot: Snapshot, work: Callable[..., Awaitable[Any]], reading: bool, prog: str) -> Any:
    """``work`` with the key changes of a control plane opened on the config's store (``on_store``)."""
    config_ids = frozenset(k.id for k in snapshot.api_keys.keys)

    async def with_changes(plane: ControlPlane) -> Any:
        return await work(plane, KeyChanges(plane, lambda: config_ids, clock=plane.clock,
                                            actor=Actor(created_by(), None)))   # audited as the CLI's user
    return await on_store(snapshot, with_changes, reading, prog, "database keys")


async def on_store(snapshot: Snapshot, work: Callable[[ControlPlane], Awaitable[Any]], reading: bool, prog: str,
                   what: str) -> Any:
    """``work`` on a control plane opened on the config's store, then closed. A command that only reads
    creates nothing: a SQLite file not there yet holds no ``what`` (said on stderr)."""
    data = snapshot.server.data_path()
    store = open_control_store(snapshot.usage, data)
    missing = _missing(store)
    if reading and missing is not None:
        plane = ControlPlane(None, None, why_off=missing)
    else:
        try:
            secret, off = control_secret(snapshot.usage, data)   # made on a new machine, as the gateway does
        except (OSError, ValueError) as exc:   # not readable by this user, or empty
            raise ControlPlaneUnavailable(f"the server secret cannot be read: {exc}") from None
        plane = ControlPlane(store, secret, why_off=off)
    await plane.start()
    try:
        if plane.store is None and reading:
            print(f"{prog}: no {what}: {plane.why_off}", file=sys.stderr)
        elif plane.store is not None and not plane.up:
            raise ControlPlaneUnavailable(f"the key store ({plane.store.name}) is not answering: {plane.error}")
        return await work(plane)
    finally:
        with trio.CancelScope(shield=True):
            await plane.aclose()


def _missing(store: Any) -> str | None:
    """Why there is no store to read yet: a SQLite file that is not there (None: there is one)."""
    if isinstance(store, SqlControlStore) and isinstance(store.db, SqliteStore) and not store.db.path.exists():
        return f"no ledger file at {store.db.path} yet (the gateway's first start or keys create makes it)"
    return None


# --- the commands: each reads its options, and returns the work to do on the store ----------------------

def _create(args: argparse.Namespace, snapshot: Snapshot) -> Work:
    values = create_body(keys_flags.create_values(args), time.time())
    check_backends(values.allowed_backends, {b.name for b in snapshot.backends})

    async def work(plane: ControlPlane, changes: KeyChanges) -> dict[str, Any]:
        record, secret = await changes.create(values.values(), values.id, created_by())
        return {**shown.page(record.key, record, plane.clock()), "secret": secret}
    return work, False


def _list(args: argparse.Namespace, snapshot: Snapshot) -> Work:
    async def work(plane: ControlPlane, changes: KeyChanges) -> dict[str, Any]:
        now = plane.clock()
        rows = listing.rows(snapshot.api_keys.keys, plane.view.records, args.source)
        return {"keys": [shown.page(row[1], row[2], now) for row in rows
                         if listing.matches(row, args.organization_id, args.status, now)], "next": None}
    return work, True


def _show(args: argparse.Namespace, snapshot: Snapshot) -> Work:
    async def work(plane: ControlPlane, changes: KeyChanges) -> dict[str, Any]:
        key, record = listing.find(snapshot.api_keys.keys, plane.view.records, args.key_id)
        return shown.page(key, record, plane.clock())
    return work, True


def _update(args: argparse.Namespace, snapshot: Snapshot) -> Work:
    given = patch_body(keys_flags.patch_values(args), time.time()).changes()
    check_backends(given.get("allowed_backends"), {b.name for b in snapshot.backends})

    async def work(plane: ControlPlane, changes: KeyChanges) -> dict[str, Any]:
        record = await changes.update(args.key_id, given)
        return shown.page(record.key, record, plane.clock())
    return work, False


def _rotate(args: argparse.Namespace, snapshot: Snapshot) -> Work:
    grace = rotate_body(keys_flags.rotate_values(args)).grace_seconds

    async def work(plane: ControlPlane, changes: KeyChanges) -> dict[str, Any]:
        record, secret = await changes.rotate(args.key_id, grace)
        return {**shown.page(record.key, record, plane.clock()), "secret": secret}
    return work, False


def _revoke(args: argparse.Namespace, snapshot: Snapshot) -> Work:
    async def work(plane: ControlPlane, changes: KeyChanges) -> dict[str, Any]:
        record = await changes.revoke(args.key_id)
        return shown.page(record.key, record, plane.clock())
    return work, False


def _delete(args: argparse.Namespace, snapshot: Snapshot) -> Work:
    async def work(plane: ControlPlane, changes: KeyChanges) -> dict[str, Any]:
        await changes.delete(args.key_id)
        return {"id": args.key_id, "deleted": True}
    return work, False


COMMANDS: dict[str, Callable[[argparse.Namespace, Snapshot], Work]] = {
    "create": _create, "list": _list, "show": _show, "update": _update, "rotate": _rotate, "revoke": _revoke,
    "delete": _delete}


def created_by() -> str:
    """Who made a key from the command line: ``cli:<the unix user>``."""
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:   # no name for this uid (a container): the uid
        return f"cli:{os.getuid()}"


def _write(out: TextIO, prog: str, as_json: bool, doc: dict[str, Any]) -> None:
    if as_json:
        print(json.dumps(doc, indent=2, ensure_ascii=False), file=out)
    elif "keys" in doc:
        out.write(key_table(doc["keys"]))
    elif doc.get("deleted"):
        print(f"deleted key {doc['id']!r}", file=out)
    else:
        out.write(key_lines(doc))
        if "secret" in doc:
            print(f"{prog}: the secret is shown this once: keep it now (only its digest is stored)",
                  file=sys.stderr)
