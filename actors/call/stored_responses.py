"""A Responses call and the responses the backends store: which backend holds ``previous_response_id``,
and remembering the id of each response relayed (``actors/stored_owners.py``).

A new call continuing a stored response is best answered by the backend
that holds it (another backend does not know the id), so that backend is
preferred among the candidates when it can take the call; failover still
reaches the others. A ``previous_response_id`` the gateway does not know
as this key's (relayed for another key, forgotten past the bounds, or not
found while the shared store is away) is refused with the words a backend
uses for an id it does not know, so the context of another key's
conversation is never reached: the backends are called with the gateway's
credentials, whoever the client is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.messages import Call
from switchyard.actors.response_owners import owner_of
from switchyard.config.endpoints import Endpoint

if TYPE_CHECKING:
    from switchyard.actors.stored_owners import StoredOwners

# Endpoints whose answers come from the Responses API (relayed by actors/responses_relay.py).
RESPONSES_ENDPOINTS = frozenset({Endpoint.RESPONSES, Endpoint.COMPACT})


def _previous(call: Call) -> str | None:
    if call.endpoint not in RESPONSES_ENDPOINTS:
        return None
    previous = call.payload.get("previous_response_id")
    return previous if isinstance(previous, str) and previous else None


def _refused(previous: str) -> InvalidRequest:
    return InvalidRequest(f"Previous response with id '{previous}' not found.", param="previous_response_id",
                          code="previous_response_not_found")


def holder(owners: "StoredOwners", call: Call) -> str | None:
    """The backend this worker knows holds the call's ``previous_response_id`` for its key; None when it
    knows none (``shared_holder`` then asks the store). Raises the 400 for an id relayed for another key."""
    previous = _previous(call)
    if previous is None:
        return None
    memory, owner, now = owners.memory, owner_of(call.key), trio.current_time()
    found = memory.backend_of(owner, previous, now)
    if found is None and memory.known_to_other(owner, previous, now):
        raise _refused(previous)
    return found


async def shared_holder(owners: "StoredOwners", call: Call) -> str | None:
    """``holder`` from the store every worker shares, for an id this worker's memory does not know.
    Raises the 400 for an id not found as this key's there either (fail closed: with the store away,
    too)."""
    previous = _previous(call)
    if previous is None:
        return None
    found = await owners.lookup(owner_of(call.key), previous)
    if found.backend is None:
        raise _refused(previous)
    return found.backend


class Remember:
    """Notes the id of the Response a ``POST /v1/responses`` answer names (one the backend stores), once;
    the relay awaits it before the first bytes naming the id reach the client."""

    def __init__(self, owners: "StoredOwners", call: Call, backend: str) -> None:
        self.owners, self.backend = owners, backend
        self.owner = owner_of(call.key)
        self.stored = call.endpoint == Endpoint.RESPONSES and call.payload.get("store") is not False
        self.noted: str | None = None

    async def __call__(self, response_id: str | None) -> None:
        if response_id is None or not self.stored or response_id == self.noted:
            return
        self.noted = response_id
        await self.owners.remember(self.owner, response_id, self.backend)
