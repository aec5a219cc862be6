"""``switchyard keys``' options as the admin API's key bodies, and a body's field paths as the options.

Each option gives one field of the JSON body ``POST`` or ``PATCH /admin/keys``
takes, and the body is then read by the same functions
(``config/key_body.py``), so a value is refused by the same rule in the same
words; only the path is said the way it was typed: ``--rate-limit
requests_per_minute`` where the API says ``body.rate_limit.requests_per_minute``.

``--rate-limit`` and ``--budget`` take the whole object in one option
(``requests_per_minute=60,tokens_per_minute=1000``): the names are the
config's and the API's own, and one option per object shows what a change
does (a field given replaces the key's whole value; nothing is merged).
A value that reads as a JSON number is a number, anything else a string,
as the same text would be in a JSON body.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from switchyard.config.key_body import KEY_FIELDS, RECORD_FIELDS, ROOT, KeyBodyError

# a body field -> the option that gives it
FLAGS = {"id": "--id", "organization_id": "--organization-id", "tier": "--tier",
         "allowed_models": "--allowed-model", "allowed_backends": "--allowed-backend",
         "rate_limit": "--rate-limit", "budget": "--budget", "expires_at": "--expires-at",
         "allowed_mcp_servers": "--allowed-mcp-server", "allowed_mcp_tools": "--allowed-mcp-tool",
         "metadata": "--label", "grace_seconds": "--grace", "cache": "--cache"}
FIELDS = (*KEY_FIELDS, *RECORD_FIELDS)
# what ``--clear`` takes: an option's name, or the API's field name
CLEARABLE = {**{FLAGS[f].removeprefix("--"): f for f in FIELDS}, **{f: f for f in FIELDS}}
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_PATH = re.compile(r"\.([A-Za-z0-9_]+)|\[([0-9]+)\]")


def add_field_options(parser: argparse.ArgumentParser, *, update: bool = False) -> None:
    """The options of a key's fields (``update``: as changes, each replacing the key's whole value)."""
    def unset(default: str) -> str:
        return " (replaces the key's list)" if update else f" (none: {default})"

    parser.add_argument("--organization-id", metavar="ORG_ID", help="the organization the key belongs to")
    parser.add_argument("--tier", help="the key's tier (smart routing reads it)")
    parser.add_argument("--allowed-model", action="append", metavar="GLOB",
                        help="a model name or glob the key may call; repeat for more" + unset("every model"))
    parser.add_argument("--allowed-backend", action="append", metavar="NAME",
                        help="a backend of the config the key may reach; repeat for more"
                             + unset("every public backend"))
    parser.add_argument("--allowed-mcp-server", action="append", metavar="GLOB",
                        help="an MCP server name or glob the key may reach at /mcp; repeat for more"
                             + unset("every server"))
    parser.add_argument("--allowed-mcp-tool", action="append", metavar="GLOB",
                        help="a tool name or glob (<server>__<tool>) the key may list and call at /mcp; repeat "
                             "for more" + unset("every tool"))
    replaces = " (replaces the key's whole limit: nothing is merged)" if update else ""
    parser.add_argument("--rate-limit", action="append", metavar="NAME=VALUE[,...]",
                        help="of requests_per_second, requests_per_minute, tokens_per_minute, max_concurrent: "
                             f"e.g. requests_per_minute=60,tokens_per_minute=1000{replaces}")
    parser.add_argument("--budget", action="append", metavar="NAME=VALUE[,...]",
                        help="of limit_usd, limit_tokens, period (day, week, month, total; default month): "
                             f"e.g. limit_usd=50,period=month{replaces}")
    parser.add_argument("--expires-at", metavar="TIME",
                        help="refused from then on: RFC 3339 with a timezone (2027-01-31T00:00:00Z) or Unix "
                             "seconds")
    parser.add_argument("--cache", choices=("true", "false"),
                        help="false: the key's calls never read nor write the response cache"
                             + ("" if update else " (none: as response_cache says)"))
    parser.add_argument("--label", action="append", metavar="NAME=VALUE",
                        help="a free-form label (the API's metadata); repeat for more"
                             + (" (the labels given replace the key's)" if update else ""))


def create_values(args: argparse.Namespace) -> dict[str, Any]:
    """The body of ``POST /admin/keys`` the options give (the fields given only)."""
    body = _given(args)
    if args.id is not None:
        body["id"] = args.id
    return body


def patch_values(args: argparse.Namespace) -> dict[str, Any]:
    """The body of ``PATCH /admin/keys/{id}``: the fields given, and null for each ``--clear FIELD``."""
    body = _given(args)
    problems: list[tuple[str, str]] = []
    for name in args.clear or ():
        field = CLEARABLE.get(name)
        if field is None:
            problems.append(("--clear", f"has no field {name!r}: one of "
                                        f"{', '.join(FLAGS[f].removeprefix('--') for f in FIELDS)}"))
        elif field in body:
            problems.append((f"--clear {name}", f"cannot be given with {FLAGS[field]}"))
        else:
            body[field] = None
    if not body and not problems:
        problems.append(("", "nothing to change: give a field's option or --clear FIELD"))
    if problems:
        raise KeyBodyError(problems)
    return body


def rotate_values(args: argparse.Namespace) -> dict[str, Any] | None:
    """The body of ``POST /admin/keys/{id}/rotate`` (None: no body, no grace)."""
    return None if args.grace is None else {"grace_seconds": scalar(args.grace)}


def flag_path(path: str) -> str:
    """A body's field path as the option that gives it: ``body.rate_limit.requests_per_minute`` is
    ``--rate-limit requests_per_minute``, ``body.allowed_models[1]`` ``--allowed-model #2``."""
    if not path.startswith(ROOT + "."):
        return path   # an option's own problem, or the body as a whole
    m = re.match(r"[A-Za-z0-9_]+", path[len(ROOT) + 1:])
    field = m.group(0) if m else ""
    out = FLAGS.get(field, f"--{field.replace('_', '-')}")
    rest = path[len(ROOT) + 1 + len(field):]
    for name, index in _PATH.findall(rest):
        out += f" {name}" if name else f" #{int(index) + 1}"
    return out


def scalar(text: str) -> Any:
    """A JSON number's text as the number (an integer when it has no fraction or exponent), else the text."""
    m = _NUMBER.fullmatch(text)
    if m is None:
        return text
    return float(text) if m.group(1) or m.group(2) else int(text)


def _given(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for field, value in (("organization_id", args.organization_id), ("tier", args.tier),
                         ("allowed_models", args.allowed_model), ("allowed_backends", args.allowed_backend),
                         ("allowed_mcp_servers", args.allowed_mcp_server),
                         ("allowed_mcp_tools", args.allowed_mcp_tool),
                         ("expires_at", None if args.expires_at is None else scalar(args.expires_at)),
                         ("cache", None if args.cache is None else args.cache == "true")):
        if value is not None:
            body[field] = value
    for field, texts, as_text in (("rate_limit", args.rate_limit, False), ("budget", args.budget, False),
                                  ("metadata", args.label, True)):
        if texts is not None:
            body[field] = pairs(field, texts, as_text, problems)
    if problems:
        raise KeyBodyError(problems)
    return body


def pairs(field: str, texts: list[str], as_text: bool, problems: list[tuple[str, str]]) -> dict[str, Any]:
    """``NAME=VALUE[,NAME=VALUE...]`` of each occurrence of the option, as one object (``as_text``: one pair
    an occurrence, its value kept as typed: a label's value may hold commas)."""
    flag = FLAGS[field]
    shape = "NAME=VALUE" if as_text else "NAME=VALUE[,NAME=VALUE...]"
    out: dict[str, Any] = {}
    for text in texts:
        for item in [text] if as_text else text.split(","):
            name, sep, value = item.partition("=")
            if not sep or not name:
                problems.append((flag, f"must be {shape}, got {text!r}"))
                break
            if name in out:
                problems.append((f"{flag} {name}", "is given twice"))
                continue
            out[name] = value if as_text else scalar(value)
    return out
