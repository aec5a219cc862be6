"""Which of a client's ``anthropic-beta`` names a native anthropic backend is sent.

A beta feature runs on the operator's key, and some are priced above the
standard rate, so ``backends[].anthropic_betas`` decides which ones a client
may turn on (config/kinds/anthropic.py). This is the one place where part of a
client's request is dropped rather than refused, on purpose: a client (say
Claude Code) sends the betas it would like, and a refusal would lock it out
of a backend whose operator simply does not pay for them. What was dropped
is logged at debug, by name only.

Pure but for that log line.
"""

from __future__ import annotations

import logging

from switchyard.config.schema import BackendConfig

log = logging.getLogger("switchyard.route")


def forwarded_betas(backend: BackendConfig, header: str | None) -> str | None:
    """The ``anthropic-beta`` value for ``backend`` from the client's ``header`` (None: send none).

    Without ``anthropic_betas`` the header goes as the client sent it; with
    it, only the listed names (compared exactly), in the client's order.
    """
    if not header or backend.anthropic_betas is None:
        return header or None
    names = [n.strip() for n in header.split(",") if n.strip()]
    kept = [n for n in names if n in backend.anthropic_betas]
    dropped = [n for n in names if n not in backend.anthropic_betas]
    if dropped:
        log.debug("anthropic-beta not allowed on backend %s, not sent: %s", backend.name, ", ".join(dropped))
    return ",".join(kept) or None
