"""A batch's owner's key, looked up by id as each line starts: the line runs under the key as it is now.

A batch outlives the request that made it: its key may be narrowed, deleted
or revoked while it runs, and the gateway holds no secret to judge it by
again. So each line looks its owner up afresh: a config key in the running
revision's ``api_keys``, else a database key in the control plane's view. A
key gone is the 401 a client would get with it (``invalid_api_key``,
``key_revoked``, ``key_expired``); a batch made with keys off runs with no
key, and gets ``missing_api_key`` once keys are on. Pure: ``now`` is an
argument.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switchyard.actors.control.view import KeyView, expired, invalid, revoked
from switchyard.actors.errors import AuthenticationError
from switchyard.actors.response_owners import ANONYMOUS

if TYPE_CHECKING:
    from switchyard.config.access import Access, ApiKey


def owner_key(owner: str, access: "Access", view: KeyView, keys_on: bool, now: float) -> "ApiKey | None":
    """``owner``'s key now (None: keys are off and the batch was made without one), or raise the 401.
    ``keys_on``: the data plane asks for a key (config keys, or database keys)."""
    if owner == ANONYMOUS:
        if keys_on:
            raise AuthenticationError("This batch was created without an API key, and the gateway now "
                                      "requires one", code="missing_api_key")
        return None
    for key in access.keys:
        if key.id == owner:
            return key
    record = view.records.get(owner)
    if record is None:
        raise invalid()
    if record.revoked_at is not None and record.revoked_at <= now:
        raise revoked()
    if record.expires_at is not None and record.expires_at <= now:
        raise expired()
    return record.key
