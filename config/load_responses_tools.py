"""Validation of ``responses_tools``.

Every entry is a wire type name the policy compares against what clients
send, so an entry that can never match (an invisible character, a space) or
that contradicts itself (in both lists, or naming a client-executed type that
is always allowed) is a load error naming its path: a policy that loads must
mean what it says.
"""

from __future__ import annotations

import difflib
import unicodedata
from typing import Any

from switchyard.config import rules
from switchyard.config.fields import read
from switchyard.config.responses_tools import (
    ALWAYS_ALLOWED,
    RESOURCE_FIELDS,
    ResponsesTools,
    ascii_fold,
)
from switchyard.config.rules import Reader, child


def responses_tools(r: Reader) -> ResponsesTools:
    d = ResponsesTools()
    unmodeled = read(r, ResponsesTools, "unmodeled_types")
    modeled = read(r, ResponsesTools, "modeled_hosted_types")
    allow = _type_entries(r, "allow")
    deny = _type_entries(r, "deny")
    allowed_at = {ascii_fold(name): path for path, name in allow}
    for path, name in deny:
        if ascii_fold(name) in allowed_at:
            r.problems.error(path, f"{name!r} is also in allow ({allowed_at[ascii_fold(name)]}); a type cannot be "
                                   f"both allowed and denied (compared in any ASCII case)")
    fields = _resource_fields(r)
    r.finish()
    return ResponsesTools(
        unmodeled_types=unmodeled,
        modeled_hosted_types=modeled,
        allow=frozenset(name for _, name in allow),
        deny=frozenset(ascii_fold(name) for _, name in deny),
        deny_resource_fields=d.deny_resource_fields if fields is None else frozenset(fields),
    )


def _raw_list(r: Reader, key: str, what: str) -> list[Any] | None:
    """The raw list under ``key`` (marked as read), or None when absent or not a list (reported)."""
    value = r.get(key, lambda v: v, None)
    if value is None:
        return None
    if not isinstance(value, list):
        r.problems.error(child(r.path, key), f"must be a list of {what}, got {rules.type_name(value)}")
        return None
    return value


def _type_entries(r: Reader, key: str) -> list[tuple[str, str]]:
    """``(path, entry)`` for each valid entry of the ``allow`` or ``deny`` list."""
    out = []
    for i, entry in enumerate(_raw_list(r, key, "tool type names") or ()):
        path = child(child(r.path, key), i)
        problem = type_entry_problem(entry)
        if problem:
            r.problems.error(path, problem)
        else:
            out.append((path, entry))
    return out


def type_entry_problem(entry: Any) -> str | None:
    """Why ``entry`` cannot be an ``allow``/``deny`` entry, or None."""
    if not isinstance(entry, str):
        return f"must be a tool type name (a string), got {rules.type_name(entry)}"
    if not entry:
        return "must not be empty"
    for ch in entry:
        if not "\x21" <= ch <= "\x7e":
            return (f"{ascii(entry)} contains {_describe(ch)}, which is not printable ASCII; "
                    f"such an entry could never match a tool type")
    if ascii_fold(entry) in ALWAYS_ALLOWED:
        return (f"{entry!r} names {ascii_fold(entry)}, which is executed by the client and always allowed; "
                f"only backend-executed types belong in allow or deny")
    return None


def _describe(ch: str) -> str:
    if ch == " ":
        return "a space"
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X}" + (f" ({name})" if name else f" ({unicodedata.category(ch)})")


def _resource_fields(r: Reader) -> list[str] | None:
    raw = _raw_list(r, "deny_resource_fields", "resource field names")
    if raw is None:
        return None
    out = []
    for i, entry in enumerate(raw):
        path = child(child(r.path, "deny_resource_fields"), i)
        if not isinstance(entry, str):
            r.problems.error(path, f"must be a resource field name (a string), got {rules.type_name(entry)}")
        elif entry not in RESOURCE_FIELDS:
            close = difflib.get_close_matches(entry, RESOURCE_FIELDS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            r.problems.error(path, f"unknown resource field {ascii(entry)}{hint}; expected one of "
                                   f"{', '.join(RESOURCE_FIELDS)}")
        else:
            out.append(entry)
    return out
