"""Cache affinity: calls that share a provider-cache key go to the same backend among equal candidates.

Providers cache prompt prefixes per deployment (OpenAI's automatic prefix
cache, which ``prompt_cache_key`` steers; vLLM's and SGLang's KV caches): a
repeated prefix is cheap only where it was seen before. Spreading one
conversation over three deployments of a model pays the full input price
three times. This is a tie-break, not a strategy: the pool applies it after
health, admission, the client's preferences and the live-signal terms have
left the candidates that are otherwise equal, and in place of the configured
strategy only for a call that carries a key.

The key's home is its position on a hash ring of those candidates
(``prefix_routing``'s ring, so a prefix lands where ``PrefixAwareHash``
would put it), under the same bounded-load rule: a home already past
(1 + epsilon) times the mean in-flight load passes the call to the next
backend clockwise. A home that is unhealthy is not on the ring, so its keys
go to the next backend clockwise, all of them to the same one, and come back
when it is healthy again.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from attrs import frozen

from switchyard.actors.routing.strategies import Candidate, Rings, prompt_prefix

PROMPT_CACHE_KEY = "prompt_cache_key"
PREFIX = "prefix"
KINDS = (PROMPT_CACHE_KEY, PREFIX)
OUTCOMES = ("home", "moved")   # moved: the home was past the load bound, the next on the ring took the call


@frozen
class AffinityKey:
    kind: str    # PROMPT_CACHE_KEY or PREFIX
    value: str


@frozen
class Placement:
    """Where a key went: its ``home`` on the ring, and the ``backend`` the load bound let it use."""

    kind: str
    home: str
    backend: str

    @property
    def moved(self) -> bool:
        return self.home != self.backend

    @property
    def outcome(self) -> str:
        return OUTCOMES[self.moved]


def affinity_key(payload: Mapping[str, Any], mode: str, max_prefix_length: int | None) -> AffinityKey | None:
    """The call's key under ``mode`` (``both``, ``prompt_cache_key``, ``prefix``), or None.

    A non-empty string ``prompt_cache_key`` wins over the prefix; ``max_prefix_length`` None means
    prefixes are off (``prefix_routing.enabled: false``)."""
    if mode != PREFIX:
        given = payload.get(PROMPT_CACHE_KEY)
        if isinstance(given, str) and given:
            return AffinityKey(PROMPT_CACHE_KEY, given)
    if mode == PROMPT_CACHE_KEY or max_prefix_length is None:
        return None
    prefix = conversation_prefix(payload, max_prefix_length)
    return AffinityKey(PREFIX, prefix) if prefix else None


def conversation_prefix(payload: Mapping[str, Any], max_length: int) -> str:
    """A chat call's ``messages``, or a Responses call's ``instructions`` and ``input``, as
    ``prompt_prefix`` reads them: instructions count as the system turn, a string input as a user turn."""
    if "messages" in payload:
        return prompt_prefix(payload["messages"], max_length)
    turns: list[Any] = []
    instructions = payload.get("instructions")
    if isinstance(instructions, str) and instructions:
        turns.append({"role": "system", "content": instructions})
    given = payload.get("input")
    if isinstance(given, str):
        turns.append({"role": "user", "content": given})
    elif isinstance(given, list):
        turns.extend(given)
    return prompt_prefix(turns, max_length)


class CacheAffinity:
    """The rings, one per candidate set; rebuilt by the pool when ``virtual_nodes`` changes."""

    def __init__(self, virtual_nodes: int) -> None:
        self.rings = Rings(virtual_nodes)

    def place(self, candidates: Sequence[Candidate], key: AffinityKey, in_flight: Mapping[str, int],
              epsilon: float) -> Placement:
        home, backend = self.rings.ring(candidates).place_bounded(key.value, in_flight, epsilon)
        return Placement(key.kind, home, backend)
