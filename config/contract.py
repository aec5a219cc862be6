"""Keys of the configuration contract that Switchyard does not implement.

The contract (the spec's config keys) promises that a config written for it
loads unchanged. A key it names that Switchyard has not built is refused by
name, saying so and where to read more, instead of as an "unknown key" that
reads like a typo; a key the contract does not name keeps that error. The
refusal is an error, not a warning: the file asks for behaviour this gateway
would not give, and nothing is silently dropped.
"""

from __future__ import annotations

import re

from attrs import frozen

DOC = "docs/configuration.md#contract-keys-not-supported"


@frozen
class Unsupported:
    path: str            # dotted, with [] for any list index
    doc: str = DOC       # where a user reads what it was and what to do instead
    planned: bool = False   # an issue plans it: "not supported yet"


UNSUPPORTED: dict[str, Unsupported] = {u.path: u for u in (
    Unsupported("prefix_routing.salt_echo"),
    Unsupported("kv_cache_index.backend"),
    Unsupported("server.socket_mode"),
    Unsupported("control_plane"),
)}

_INDEX = re.compile(r"\[\d+\]")


def refusal(path: str) -> str | None:
    """The error for an unread key at ``path`` if the contract names it, else None (an unknown key)."""
    u = UNSUPPORTED.get(_INDEX.sub("[]", path))
    if u is None:
        return None
    yet = " yet" if u.planned else ""
    return f"part of the configuration contract but not supported by Switchyard{yet} (see {u.doc})"
