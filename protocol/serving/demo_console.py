"""The embedded demo's console link: an admin token made for one run, printed as a URL that logs in.

The demo has no ``admin.token``, so its console would answer 404. When
``serve`` runs the demo (no config file) on a loopback address, it makes a
random token at start, uses it as ``admin.token`` for this run, and prints
the console's URL with it, as notebook servers do. The token lives in memory
only: never written to disk, never logged; it reaches the workers as an
argument of their process (a pipe, not the environment or the command line),
and it ends with the run.

Never on another address (the link would open the admin API to whoever
reads it from another machine's traffic), never with a config file (there
the operator's ``admin.token`` rules stand, and a token never goes in a
URL), never when the config has a token already.
"""

from __future__ import annotations

import logging
import secrets
import sys

import attrs
from attrs import frozen

from switchyard.config.schema import Snapshot
from switchyard.protocol.http.auth import loopback

log = logging.getLogger("switchyard")

TOKEN_BYTES = 32
ANNOUNCE = "The console, logged in by this link until the gateway stops: {url}"


@frozen
class ConsoleLink:
    token: str = attrs.field(repr=False)
    url: str = attrs.field(repr=False)


def wanted(config_path: str | None, bind: str, admin_token: str | None) -> bool:
    """Whether this run makes its own admin token: the demo, on loopback, with no token of its own."""
    return config_path is None and admin_token is None and loopback(bind)


def console_link(config_path: str | None, bind: str, admin_token: str | None) -> ConsoleLink | None:
    """A new token and the console URL carrying it, when ``wanted``; else None."""
    if not wanted(config_path, bind, admin_token):
        return None
    token = secrets.token_urlsafe(TOKEN_BYTES)
    return ConsoleLink(token, console_url(bind, token))


def console_url(bind: str, token: str) -> str:
    """``http://HOST:PORT/admin/ui/?token=...`` (``token_urlsafe`` needs no escaping)."""
    return f"http://{bind}/admin/ui/?token={token}"


def with_admin_token(snapshot: Snapshot, token: str) -> Snapshot:
    """``snapshot`` with ``admin.token`` set to the run's token."""
    return attrs.evolve(snapshot, admin=attrs.evolve(snapshot.admin, token=token))


def announce(link: ConsoleLink) -> None:
    """The one line that shows the token: on stdout, whatever the log's level and format. A closed stdout
    (a pipe whose reader left) costs the link, never the gateway."""
    try:
        print(ANNOUNCE.format(url=link.url), file=sys.stdout, flush=True)
    except OSError as exc:
        log.warning("could not print the console's link on standard output: %s", exc.strerror or type(exc).__name__)
