"""The six selection strategies, as deterministic pickers over candidates.

Candidates arrive already filtered (visibility, model, health); a strategy
only chooses among them. Everything a picker needs from the outside world --
in-flight counts, latency averages, a random draw, the hash key -- comes in a
``PickContext``, so these run the same in a unit test as in production.
Counters that a strategy keeps (round-robin positions, smooth weights) are its
own; latency and load statistics live with the caller, so swapping the
strategy on reload keeps them.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Mapping, Protocol, Sequence, TypeVar

from attrs import frozen

from switchyard.actors.routing.hashring import HashRing
from switchyard.config.schema import ConsistentHashConfig, PrefixRouting, Strategy


class Candidate(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def weight(self) -> int: ...


C = TypeVar("C", bound=Candidate)   # a picker answers one of the candidates it was given, of their type


@frozen
class PickContext:
    random: float = 0.0                       # a draw in [0, 1) from the caller's RNG
    hash_key: str | None = None               # ConsistentHash: session header or `user`
    prefix_key: str | None = None             # PrefixAwareHash: the prompt prefix
    in_flight: Mapping[str, int] = {}
    latency: Mapping[str, float] = {}         # moving average seconds, absent = never measured


_MAX_TRACKED_SETS = 1024


class RoundRobin:
    """Each distinct candidate set takes turns in order."""

    def __init__(self) -> None:
        self._next: OrderedDict[tuple[str, ...], int] = OrderedDict()

    def pick(self, cands: Sequence[C], ctx: PickContext) -> C:
        key = tuple(c.name for c in cands)
        i = self._next.pop(key, 0)
        self._next[key] = (i + 1) % len(cands)
        if len(self._next) > _MAX_TRACKED_SETS:
            self._next.popitem(last=False)
        return cands[i % len(cands)]


class WeightedRoundRobin:
    """Smooth weighted round robin: proportions exact, picks interleaved.

    Every pick adds each candidate's weight to its running score, takes the
    highest, and charges the winner the total weight; weights 5:1:1 give
    a a b a c a a, not a a a a a b c.
    """

    def __init__(self) -> None:
        self._scores: OrderedDict[tuple[str, ...], dict[str, int]] = OrderedDict()

    def pick(self, cands: Sequence[C], ctx: PickContext) -> C:
        key = tuple(c.name for c in cands)
        scores = self._scores.pop(key, None) or {c.name: 0 for c in cands}
        self._scores[key] = scores
        if len(self._scores) > _MAX_TRACKED_SETS:
            self._scores.popitem(last=False)
        total = 0
        best: C | None = None
        for c in cands:
            scores[c.name] += c.weight
            total += c.weight
            if best is None or scores[c.name] > scores[best.name]:
                best = c
        assert best is not None
        scores[best.name] -= total
        return best


class LeastLatency:
    """Lowest moving-average latency; a never-measured backend goes first."""

    def pick(self, cands: Sequence[C], ctx: PickContext) -> C:
        def rank(c: C) -> tuple[float, int]:
            return (ctx.latency.get(c.name, -1.0), ctx.in_flight.get(c.name, 0))
        return min(cands, key=rank)


class Random:
    """Uniform over the candidates."""

    def pick(self, cands: Sequence[C], ctx: PickContext) -> C:
        return cands[min(int(ctx.random * len(cands)), len(cands) - 1)]


class Rings:
    """Hash rings per candidate set (a bounded LRU): built once, reused while the set stays the same."""

    def __init__(self, virtual_nodes: int) -> None:
        self.virtual_nodes = virtual_nodes
        self._rings: OrderedDict[tuple[str, ...], HashRing] = OrderedDict()

    def ring(self, cands: Sequence[Candidate]) -> HashRing:
        key = tuple(sorted(c.name for c in cands))
        ring = self._rings.pop(key, None) or HashRing(key, self.virtual_nodes)
        self._rings[key] = ring
        if len(self._rings) > 256:
            self._rings.popitem(last=False)
        return ring


def _by_name(cands: Sequence[C], name: str) -> C:
    return next(c for c in cands if c.name == name)


class ConsistentHash:
    """Same key, same backend; one of N leaving moves about 1/N of the keys.

    Requests without a key take turns (round robin) instead of piling onto
    the ring position of an empty string.
    """

    def __init__(self, cfg: ConsistentHashConfig) -> None:
        self._rings = Rings(cfg.virtual_nodes)
        self._fallback = RoundRobin()

    def pick(self, cands: Sequence[C], ctx: PickContext) -> C:
        if not ctx.hash_key:
            return self._fallback.pick(cands, ctx)
        return _by_name(cands, self._rings.ring(cands).lookup(ctx.hash_key))


class PrefixAwareHash:
    """Requests sharing a prompt prefix go to one backend (its KV cache is
    warm), unless that backend already carries more than (1 + epsilon) times
    the mean in-flight load; then the next one clockwise takes it."""

    def __init__(self, cfg: PrefixRouting) -> None:
        self._rings = Rings(cfg.virtual_nodes)
        self.epsilon = cfg.load_factor_epsilon

    def pick(self, cands: Sequence[C], ctx: PickContext) -> C:
        if not ctx.prefix_key:
            return min(cands, key=lambda c: ctx.in_flight.get(c.name, 0))
        ring = self._rings.ring(cands)
        return _by_name(cands, ring.lookup_bounded(ctx.prefix_key, ctx.in_flight, self.epsilon))


Picker = RoundRobin | WeightedRoundRobin | LeastLatency | Random | ConsistentHash | PrefixAwareHash


def make_picker(strategy: Strategy, chash: ConsistentHashConfig, prefix: PrefixRouting) -> Picker:
    if strategy is Strategy.ROUND_ROBIN:
        return RoundRobin()
    if strategy is Strategy.WEIGHTED_ROUND_ROBIN:
        return WeightedRoundRobin()
    if strategy is Strategy.LEAST_LATENCY:
        return LeastLatency()
    if strategy is Strategy.RANDOM:
        return Random()
    if strategy is Strategy.CONSISTENT_HASH:
        return ConsistentHash(chash)
    return PrefixAwareHash(prefix)


def prompt_prefix(messages: object, max_length: int) -> str:
    """The first ``max_length`` characters of the conversation as text.

    Roles are kept so that the same words as system prompt or as user turn
    hash apart; non-text parts (images) contribute nothing. ``messages`` is
    any JSON value (a body of another endpoint may carry anything under that
    name): what is not a list of messages is no conversation.
    """
    out: list[str] = []
    size = 0
    for msg in messages if isinstance(messages, (list, tuple)) else ():
        if not isinstance(msg, Mapping):
            continue
        content = msg.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content
                              if isinstance(p, Mapping) and isinstance(p.get("text"), str))
        if not isinstance(content, str):
            content = ""
        piece = f"{msg.get('role', '')}:{content}\n"
        out.append(piece)
        size += len(piece)
        if size >= max_length:
            break
    return "".join(out)[:max_length]
