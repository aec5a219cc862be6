"""Validation of ``backends[].anthropic_betas``: which beta features a client may turn on.

The client's ``anthropic-beta`` header would otherwise reach a native
anthropic backend as sent, so any client could switch on beta features (some
priced above the standard rate) on the operator's key. The list names the
ones it may; absent means every one the client sends, ``[]`` none.

Each name must be an HTTP token (printable ASCII without separators: what
the header's comma-separated list can carry), and appear once; errors name
the item (``backends[0].anthropic_betas[1]``).
"""

from __future__ import annotations

import re

from switchyard.config.rules import Reader, child, type_name
from switchyard.config.schema import BackendType

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def anthropic_betas(r: Reader, btype: BackendType) -> tuple[str, ...] | None:
    """The backend's allowed beta names, or None when the key is absent (or null)."""
    path = child(r.path, "anthropic_betas")
    raw = r.get("anthropic_betas", lambda value: value, None)
    if raw is None:
        return None
    if btype is not BackendType.ANTHROPIC:
        r.problems.error(path, f"only applies to backends of type anthropic, not {btype.value}")
        return None
    if not isinstance(raw, list):
        r.problems.error(path, f"must be a list of anthropic-beta names, got {type_name(raw)}")
        return None
    out: list[str] = []
    for i, name in enumerate(raw):
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            shown = repr(name) if isinstance(name, str) else type_name(name)
            r.problems.error(child(path, i), f"must be an anthropic-beta name (printable ASCII letters, digits "
                                             f"and !#$%&'*+-.^_`|~, no spaces or commas), got {shown}")
        elif name in out:
            r.problems.error(child(path, i), f"duplicate anthropic-beta name {name!r}")
        else:
            out.append(name)
    return tuple(out)
