"""A Responses call and the responses the backends store: which backend holds ``previous_response_id``,
and remembering the id of each response relayed (``actors/response_owners.py``).

A new call continuing a stored response is best answered by the backend
that holds it (another backend does not know the id), so that backend is
preferred among the candidates when it can take the call; failover still
reaches the others. A ``previous_response_id`` the gateway relayed for
another API key is refused with the words a backend uses for an id it does
not know, so the context of another key's conversation is never reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.messages import Call
from switchyard.actors.response_owners import owner_of

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

# Endpoints whose answers come from the Responses API (relayed by actors/responses_relay.py).
RESPONSES_ENDPOINTS = frozenset({"responses", "compact"})


def holder(runtime: "Runtime", call: Call) -> str | None:
    """The backend holding the call's ``previous_response_id`` for its key; None when none is known.

    Raises the 400 for an id the gateway relayed for another key."""
    if call.endpoint not in RESPONSES_ENDPOINTS:
        return None
    previous = call.payload.get("previous_response_id")
    if not isinstance(previous, str) or not previous:
        return None
    owners, owner, now = runtime.response_owners, owner_of(call.key), trio.current_time()
    found = owners.backend_of(owner, previous, now)
    if found is None and owners.known_to_other(owner, previous, now):
        raise InvalidRequest(f"Previous response with id '{previous}' not found.", param="previous_response_id",
                             code="previous_response_not_found")
    return found


def remember(runtime: "Runtime", call: Call, backend: str, response_id: str | None) -> None:
    """Note who created ``response_id`` (a ``POST /v1/responses`` answer the backend stores)."""
    if response_id is None or call.endpoint != "responses" or call.payload.get("store") is False:
        return
    runtime.response_owners.remember(owner_of(call.key), response_id, backend, trio.current_time())
