"""Which backend created which stored response, and for which API key.

A stored Responses API object lives on the backend that created it, so
``GET``/``DELETE /v1/responses/{id}``, its ``cancel`` and ``input_items``
must go there, and ``previous_response_id`` is best answered there. The
gateway remembers each response id it relayed under the key that created
it: entries are keyed by (key id, response id), so another key's id is
simply not found (the same 404 as an id never seen, so ids cannot be
probed), and the same id from two backends under two keys never mixes.

Bounded by ``stored_responses``: at most ``max_entries`` ids (the oldest
forgotten first) and none older than ``max_age``. This is one worker's own
memory, the first place ``stored_owners.StoredOwners`` looks; the store the
workers and instances share (beside the usage ledger) answers for the rest.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from attrs import frozen

from switchyard.config.stored_responses import StoredResponses

ANONYMOUS = ""   # the owner when API keys are off: every caller is the same one
# A response id the shared store keeps and is asked for: what OpenAI's are made of (letters, digits, _ and -;
# GET /v1/responses/{id} takes no other). Anything else is never a stored response of a backend's.
_STORABLE = re.compile(r"[A-Za-z0-9_\-]{1,200}")


def storable_id(response_id: str) -> bool:
    return _STORABLE.fullmatch(response_id) is not None


@frozen
class Owner:
    backend: str
    created: float   # the trio clock when it was relayed


def owner_of(key: object) -> str:
    """The owner name of an ApiKey (its id), or ``ANONYMOUS`` with keys off."""
    return getattr(key, "id", None) or ANONYMOUS


class ResponseOwners:
    """The bounded map (owner, response id) -> backend; ``now`` comes from the caller's clock."""

    def __init__(self, policy: StoredResponses) -> None:
        self.policy = policy
        self._entries: OrderedDict[tuple[str, str], Owner] = OrderedDict()
        self._owners: dict[str, set[str]] = {}   # response id -> the owners holding it

    def __len__(self) -> int:
        return len(self._entries)

    def remember(self, owner: str, response_id: str, backend: str, now: float) -> None:
        entry = (owner, response_id)
        self._entries.pop(entry, None)
        self._entries[entry] = Owner(backend, now)
        self._owners.setdefault(response_id, set()).add(owner)
        self._trim(now)

    def backend_of(self, owner: str, response_id: str, now: float) -> str | None:
        """The backend holding ``response_id`` for ``owner``; None when unknown, forgotten or another key's."""
        self._trim(now)
        found = self._entries.get((owner, response_id))
        return found.backend if found is not None else None

    def forget(self, owner: str, response_id: str) -> None:
        if self._entries.pop((owner, response_id), None) is not None:
            self._dropped(owner, response_id)

    def _dropped(self, owner: str, response_id: str) -> None:
        owners = self._owners.get(response_id)
        if owners is not None:
            owners.discard(owner)
            if not owners:
                del self._owners[response_id]

    def known_to_other(self, owner: str, response_id: str, now: float) -> bool:
        """Whether another owner holds ``response_id`` (a ``previous_response_id`` that is not the caller's)."""
        self._trim(now)
        return bool(self._owners.get(response_id, set()) - {owner})

    def _trim(self, now: float) -> None:
        entries, policy = self._entries, self.policy
        while len(entries) > policy.max_entries:
            self._dropped(*entries.popitem(last=False)[0])
        oldest = now - policy.max_age
        while entries:
            first = next(iter(entries.values()))
            if first.created > oldest:
                break
            self._dropped(*entries.popitem(last=False)[0])

    def reconfigure(self, policy: StoredResponses) -> None:
        """A reload's new bounds, applied at the next use."""
        self.policy = policy
