"""``switchyard keys``' output for people: one key as aligned lines, a list of keys as a table.

Read from the same page the JSON shows (``actors/control/shown.py``). A
rate limit and a budget are written as their options take them
(``requests_per_minute=60,tokens_per_minute=1000``), so a value can be
copied into the next command; none is ``-``.
"""

from __future__ import annotations

from typing import Any, Sequence

# (the line's name, where it is on the page)
LINES = (("id", ("id",)), ("source", ("source",)), ("status", ("status",)), ("prefix", ("prefix",)),
         ("organization_id", ("organization_id",)), ("tier", ("settings", "tier")),
         ("allowed_models", ("settings", "allowed_models")), ("allowed_backends", ("settings", "allowed_backends")),
         ("rate_limit", ("settings", "rate_limit")), ("budget", ("settings", "budget")),
         ("allowed_mcp_servers", ("settings", "allowed_mcp_servers")),
         ("allowed_mcp_tools", ("settings", "allowed_mcp_tools")),
         ("expires_at", ("expires_at",)), ("created_at", ("created_at",)), ("created_by", ("created_by",)),
         ("updated_at", ("updated_at",)), ("revoked_at", ("revoked_at",)), ("last_used_at", ("last_used_at",)),
         ("labels", ("metadata",)), ("previous_secret", ("previous_secret",)), ("secret", ("secret",)))
COLUMNS = ("id", "source", "status", "prefix", "organization_id", "expires_at", "last_used_at")


def key_lines(page: dict[str, Any]) -> str:
    """One key, a line a field (those a config key does not have are left out)."""
    rows = []
    for name, where in LINES:
        if where[0] not in page:
            continue   # not a field of this key (a config key's dates; the secret but once)
        value: Any = page
        for part in where:
            value = value.get(part) if isinstance(value, dict) else None
        rows.append((name, _labels(value) if name == "labels" else _text(value)))
    if page.get("read_only"):
        rows.append(("read_only", "yes: a key of the config's api_keys, changed in the config"))
    width = max(len(name) for name, _ in rows)
    return "".join(f"{name.ljust(width)}  {text}\n" for name, text in rows)


def key_table(pages: Sequence[dict[str, Any]]) -> str:
    """Keys as aligned columns under a header; no keys: a line saying so."""
    if not pages:
        return "(no keys)\n"
    rows = [list(COLUMNS), *([_text(page.get(c)) for c in COLUMNS] for page in pages)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
                   for row in rows)


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        if set(value) == {"prefix", "valid_until"}:   # a rotation's old secret
            return f"{value['prefix']} (works until {value['valid_until']})"
        return ",".join(f"{k}={v}" for k, v in value.items() if v is not None) or "-"
    return str(value)


def _labels(labels: dict[str, str]) -> str:
    """One ``--label`` each: a value may hold a comma, so they are apart by a space."""
    return " ".join(f"{name}={value}" for name, value in labels.items()) or "-"
