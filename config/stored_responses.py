"""``stored_responses``: how long the gateway remembers which backend created which stored response.

``GET``/``DELETE /v1/responses/{id}``, its ``cancel`` and ``input_items``
go to the backend that created the response; the gateway keeps that fact per
API key, bounded in count and in age, in the usage ledger's store that every
worker and instance on it shares (``actors/stored_owners.py``).
"""

from __future__ import annotations

from attrs import frozen

from switchyard.config import rules
from switchyard.config.fields import field


@frozen
class StoredResponses:
    # response ids remembered (across the workers sharing the store); past it the oldest is forgotten first
    max_entries: int = field(100_000, rules.integer(1, 10_000_000))
    # an id older than this is forgotten (OpenAI keeps stored responses 30 days)
    max_age: float = field(30 * 86_400.0, rules.duration(minimum=1, maximum=365 * 86_400))
