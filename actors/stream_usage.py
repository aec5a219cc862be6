"""Asking OpenAI-style streams for their usage, and remembering the backends that refuse to be asked.

An OpenAI-style stream reports the tokens it used only in a last chunk that
``stream_options.include_usage`` asks for; unasked, the call is priced on
estimates. So a stream to a backend of an OpenAI-wire type is asked unless
its ``stream_usage`` says ``never`` (``actors/call/attempt_body.py``). A
server that knows no such field may refuse it with a 400 (or a validation
422) naming it. Under ``auto`` (the default) that answer, to a body whose
``stream_options`` the client did not write, is nobody's failure: the
attempt sends the body again at once without the option, and the backend
is remembered here as refusing (one warning), so its next streams are not
asked until a reload changes its entry. ``always`` never drops the option
(the 400 is the call's answer). The memory is this process's: each worker
learns on its own, for the price of one refused request.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from switchyard.config.schema import BackendConfig, Snapshot

log = logging.getLogger("switchyard.route")

# The statuses a server refuses a field it does not know with: a plain 400, or a validation framework's 422.
REFUSAL_STATUSES = frozenset({400, 422})


class StreamUsageMemory:
    """Backends (by name, with the entry they were learned under) that refused ``stream_options``."""

    def __init__(self) -> None:
        self._refused: dict[str, tuple[BackendConfig, float]] = {}

    def refused(self, backend: BackendConfig) -> bool:
        """Whether ``backend``, as configured, refused the option (a call's own revision is what counts)."""
        found = self._refused.get(backend.name)   # the common case: one lookup that finds nothing
        return found is not None and (found[0] is backend or found[0] == backend)

    def remember(self, backend: BackendConfig, now: float) -> None:
        """``backend`` refused the option at ``now``: logged once, then its streams are not asked."""
        if self.refused(backend):
            return
        self._refused[backend.name] = (backend, now)
        log.warning("backend %r refused stream_options: its streams are no longer asked for their usage "
                    "(priced on estimates) until a config reload changes this backend; "
                    "set its stream_usage to 'never' to say so, or 'always' to keep asking", backend.name)

    def refused_at(self, backend: BackendConfig) -> float | None:
        """When ``backend``, as configured, refused the option (the process's clock); None: it has not."""
        return self._refused[backend.name][1] if self.refused(backend) else None

    def reconfigure(self, snapshot: Snapshot) -> None:
        """A new revision: a backend whose entry changed, or that is gone, is asked again."""
        now = {b.name: b for b in snapshot.backends}
        self._refused = {name: kept for name, kept in self._refused.items() if now.get(name) == kept[0]}


def client_options(payload: Any) -> bool:
    """Whether the client's body carries ``stream_options`` of its own (then a refusal is the client's)."""
    return isinstance(payload, dict) and payload.get("stream_options") is not None


def names_the_option(status: int, body: bytes) -> bool:
    """Whether an error answer refuses ``stream_options``: a 400 or 422 whose body names it (OpenAI's
    ``error.param`` or message, a validation error's ``loc``, a plain-text answer)."""
    return status in REFUSAL_STATUSES and b"stream_options" in body


USAGE_OPTION = b',"stream_options":{"include_usage":true}}'


def with_option(body: bytes) -> bytes | None:
    """``body``, a JSON object without ``stream_options``, with ``stream_options.include_usage`` added as its
    last member; None when its bytes are not a plain UTF-8 object (the caller re-serializes it then). Every
    member before it is the client's own bytes: the same value as a re-serialized copy, at a fraction of the
    work. An object opening with ``{`` and closing with ``}`` is neither UTF-16 nor UTF-32 (their ``{`` or
    ``}`` has a NUL beside it), so the option's ASCII joins it as UTF-8."""
    end = body.rstrip()
    if body.lstrip()[:1] != b"{" or end[-1:] != b"}" or end[:-1].rstrip()[-1:] in (b"{", b""):
        return None   # not an object's bytes, or an empty one (no member to follow)
    return end[:-1] + USAGE_OPTION


def without_option(body: bytes) -> bytes:
    """``body`` without the ``include_usage`` it was given, and without ``stream_options`` if nothing else is
    left in it (a resumed stream's body, built before the refusal was known, or a door's own option);
    ``body`` itself when it asks for no usage."""
    if b"include_usage" not in body:   # nothing to leave out: the same bytes (a refusal that is not ours)
        return body
    payload = json.loads(body)
    options = payload.get("stream_options")
    if not isinstance(options, dict) or "include_usage" not in options:
        return body
    options = {k: v for k, v in options.items() if k != "include_usage"}
    if options:
        payload["stream_options"] = options
    else:
        del payload["stream_options"]
    return json.dumps(payload).encode()
