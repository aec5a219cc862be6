"""What the Redis limiter sends its scripts and how it reads their answers: the key names (every one in
the ``{sy}`` hash tag, names percent-encoded), an admission's KEYS and arguments and the counters its
reply holds, and a settle's. No I/O here: ``redis_limits.py`` sends them."""

from __future__ import annotations

import importlib.resources
import json
import math
from typing import Any
from urllib.parse import quote

from switchyard.actors.limits.tickets import Demand, Ticket
from switchyard.actors.routing import limits as core
from switchyard.actors.routing.budget_periods import bucket_of

PREFIX = "sy:{sy}:"            # every key in one hash tag: one cluster slot for a whole call
INFLIGHT = PREFIX + "inflight"
CALLS = PREFIX + "call:"
RATE_DIMENSIONS = ("requests_per_second", "requests_per_minute", "tokens_per_minute")
ORIGIN = "redis"               # on the tickets the Redis limiter admits in Redis
FALLBACK_ORIGIN = "redis-fallback"   # ... and on those its local share admits while Redis is away


def _scripts() -> dict[str, str]:
    """The scripts of ``limits.lua``: each ``-- @script NAME`` section after the shared prelude."""
    text = importlib.resources.files("switchyard.protocol.stores").joinpath("limits.lua").read_text("utf-8")
    prelude, *sections = text.split("\n-- @script ")
    out = {}
    for section in sections:
        name, _, body = section.partition("\n")
        out[name.strip()] = f"{prelude}\n{body}"
    return out


SCRIPTS = _scripts()


# --- keys -----------------------------------------------------------------------------------

def quoted(name: str) -> str:
    """Percent-encoded: a ':' (or '{') in a model name or key id cannot make two keys one."""
    return quote(name, safe="")


def rate_key(kind: str, name: str, dimension: str) -> str:
    return f"{PREFIX}rl:{kind}:{quoted(name)}:{dimension}"


def lease_key(kind: str, name: str) -> str:
    return f"{PREFIX}cc:{kind}:{quoted(name)}"


def budget_key(owner: str, owner_id: str, bucket: str) -> str:
    return f"{PREFIX}bud:{owner}:{quoted(owner_id)}:{bucket}"


def member(ticket: Ticket) -> str:
    """The name a call's lease and record have in Redis. A call of the local share is claimed under a
    name of its own (':' never appears in a quoted id), so the release of its lost Redis admission,
    which may arrive in any order, cannot take what its claim holds."""
    call = quoted(ticket.demand.call_id)
    return call + ":share" if ticket.origin == FALLBACK_ORIGIN else call


class Keys:
    """A script's KEYS, each once, addressed by its 1-based index."""

    def __init__(self, *first: str) -> None:
        self.keys: list[str] = []
        self._index: dict[str, int] = {}
        for key in first:
            self.add(key)

    def add(self, key: str) -> int:
        if key not in self._index:
            self.keys.append(key)
            self._index[key] = len(self.keys)
        return self._index[key]


# --- what one call sends ------------------------------------------------------------------------

HOLE = "\x00"   # where a call's own amount goes in a Shape's JSON (a string no key name or number holds)


def _template(value: Any, separators: tuple[str, str] = (", ", ": ")) -> str:
    """``value`` as JSON with each HOLE a ``str.format`` field: filled with _number()s it is what
    ``json.dumps`` gives for the value with the amounts in place of the holes."""
    text = json.dumps(value, separators=separators).replace("{", "{{").replace("}", "}}")
    return text.replace(json.dumps(HOLE), "{}")


def _number(x: Any) -> str:
    """A number as ``json.dumps`` writes it (repr for an int or a finite float, the same text)."""
    kind = type(x)
    return repr(x) if kind is int or (kind is float and math.isfinite(x)) else json.dumps(x)


class Shape:
    """What every admission with the same scopes, budgets and budget buckets sends (a key and model
    under one config revision), and its settle: the keys, the order and the JSON of its spec and
    record, built once. A call fills in its record key and its own amounts: its token reservation and
    each budget line's worst case. ``SHAPES`` holds the recent ones."""

    def __init__(self, demand: Demand, buckets: tuple[str, ...]) -> None:
        keys = Keys(INFLIGHT, "")    # KEYS[2], "": each call's record
        self.order = [i for i, _ in core.ordered_budgets(demand.budgets)]
        self.scopes = core.ordered_scopes(demand.scopes)
        budgets, record = [], []
        for i in self.order:
            line = demand.budgets[i]
            key = budget_key(line.owner, line.owner_id, buckets[i])
            b = line.budget
            budgets.append([keys.add(key), -1 if b.limit_usd is None else b.limit_usd,
                            -1 if b.limit_tokens is None else b.limit_tokens, HOLE, HOLE])
            record.append([key, HOLE, HOLE])
        scopes = []
        self.dims: list[list[str]] = []
        self.costs = 0   # tokens_per_minute dimensions: each costs the call's reservation
        for s in self.scopes:
            lease = keys.add(lease_key(s.kind, s.name)) if s.limit.max_concurrent is not None else 0
            dims = [d for d in RATE_DIMENSIONS if getattr(s.limit, d) is not None]
            self.dims.append(dims)
            self.costs += "tokens_per_minute" in dims
            scopes.append([lease, s.limit.max_concurrent or 0,
                           [[keys.add(rate_key(s.kind, s.name, d)), core.PERIOD_SECONDS[d], getattr(s.limit, d),
                             HOLE if d == "tokens_per_minute" else 1] for d in dims]])
        self.keys = keys.keys
        self.spec = _template({"b": budgets, "s": scopes}, (",", ":"))
        # what settle gives back only once (tokens, budget reservations) needs the record; a lease does not
        self.record = _template(record) if record or self.costs else None
        # a settle's KEYS and spec, the call's reservation its one hole
        keys = Keys(INFLIGHT, "")
        leases = [keys.add(lease_key(s.kind, s.name)) for s in demand.scopes if s.limit.max_concurrent is not None]
        tokens = [[keys.add(rate_key(s.kind, s.name, "tokens_per_minute")), HOLE, s.limit.tokens_per_minute]
                  for s in demand.scopes if s.limit.tokens_per_minute is not None]
        spent = [keys.add(budget_key(line.owner, line.owner_id, bucket))
                 for line, bucket in zip(demand.budgets, buckets, strict=False)]
        self.settle_keys = keys.keys
        self.settle_spec = _template({"l": leases, "t": tokens, "b": spent}, (",", ":"))


SHAPES: dict[tuple[Any, ...], Shape] = {}
SHAPES_MOST = 4096   # shapes remembered (one per key, model and client address limited): past it, forgotten


def shape_of(demand: Demand, buckets: tuple[str, ...]) -> Shape:
    at = (demand.scopes, tuple((line.owner, line.owner_id, line.budget) for line in demand.budgets), buckets)
    shape = SHAPES.get(at)
    if shape is None:
        if len(SHAPES) >= SHAPES_MOST:
            SHAPES.clear()
        shape = SHAPES[at] = Shape(demand, buckets)
    return shape


class Plan:
    """An admission's KEYS and arguments, and how to read the state the script returns."""

    def __init__(self, demand: Demand, wall: float) -> None:
        self.demand = demand
        self.call = quoted(demand.call_id)
        self.buckets = tuple(bucket_of(line.budget.period, wall) for line in demand.budgets)
        self.bucket_names = tuple(b.name for b in self.buckets)
        shape = self.shape = shape_of(demand, self.bucket_names)
        self.budgets = [(demand.budgets[i], self.buckets[i]) for i in shape.order]
        amounts: list[str] = []
        for line, _ in self.budgets:
            amounts += (_number(line.worst_usd), _number(line.tokens))
        self.spec = shape.spec.format(*amounts, *[_number(demand.tokens)] * shape.costs)
        self.record = "" if shape.record is None else shape.record.format(*amounts)

    @property
    def scopes(self) -> list[core.Scope]:
        return self.shape.scopes

    def part(self) -> tuple[list[str], list[str]]:
        """This call's KEYS and arguments in an admission batch (without where its keys begin)."""
        keys = self.shape.keys.copy()
        keys[1] = CALLS + self.call
        return keys, [self.call, self.spec, self.record]

    def counters(self, reply: list[Any], leases: bool = True) -> core.Counters:
        """The counters the script read (before it decided), for the core to decide on again (without
        the calls in flight with ``leases`` False: what the core reads of an admitted call needs none)."""
        c = core.Counters()
        pos = 2
        for line, bucket in self.budgets:
            c.budgets[(line.owner, line.owner_id, bucket.name)] = budget_state(reply[pos:pos + 4])
            pos += 4
        for s, dims in zip(self.shape.scopes, self.shape.dims, strict=False):
            if leases and reply[pos] != "":
                c.leases[(s.kind, s.name)] = {f"held-{j}": math.inf for j in range(int(reply[pos]))}
            pos += 1
            for d in dims:
                if reply[pos] != "":
                    c.tat[(s.kind, s.name, d)] = float(reply[pos])
                pos += 1
        return c


def budget_state(values: list[Any]) -> core.BudgetState:
    spent_usd, reserved_usd, spent_tokens, reserved_tokens = (float(v) for v in values)
    return core.BudgetState(spent_usd=spent_usd, reserved_usd=reserved_usd, spent_tokens=int(spent_tokens),
                            reserved_tokens=int(reserved_tokens), seeded=True)


def settles_anything(demand: Demand) -> bool:
    """Whether a settle has work: a lease to end, tokens to give back or a budget to charge."""
    return bool(demand.budgets) or any(s.limit.max_concurrent is not None or s.limit.tokens_per_minute is not None
                                       for s in demand.scopes)


def settle_part(ticket: Ticket, tokens_used: int, cost_usd: float | None) -> tuple[list[str], list[str]]:
    """One call's KEYS and arguments in a settle batch (without where its keys begin)."""
    demand = ticket.demand
    call = member(ticket)
    shape = shape_of(demand, ticket.buckets)
    keys = shape.settle_keys.copy()
    keys[1] = CALLS + call
    spec = shape.settle_spec.format(*[_number(demand.tokens)] * shape.costs)
    return keys, [call, str(int(tokens_used)), "" if cost_usd is None else repr(float(cost_usd)), spec]


def claim_part(ticket: Ticket, age: float, tokens_used: int | None) -> tuple[list[str], list[str]]:
    """One call of the local share in a claim batch: ``tokens_used`` None while it is in flight (it
    then takes its leases and reservations), else what its settle reported (its windows are charged
    that)."""
    demand = ticket.demand
    call = member(ticket)
    keys = Keys(INFLIGHT, CALLS + call)
    tokens = demand.tokens if tokens_used is None else tokens_used
    rates = [[keys.add(rate_key(s.kind, s.name, d)), core.PERIOD_SECONDS[d], getattr(s.limit, d),
              tokens if d == "tokens_per_minute" else 1]
             for s in demand.scopes for d in RATE_DIMENSIONS if getattr(s.limit, d) is not None]
    leases = [keys.add(lease_key(s.kind, s.name)) for s in demand.scopes if s.limit.max_concurrent is not None]
    budgets, record = [], []
    for line, bucket in zip(demand.budgets, ticket.buckets, strict=False):
        key = budget_key(line.owner, line.owner_id, bucket)
        budgets.append([keys.add(key), line.worst_usd, line.tokens])
        record.append([key, line.worst_usd, line.tokens])
    spec = json.dumps({"t": rates, "l": leases, "b": budgets}, separators=(",", ":"))
    return keys.keys, [call, repr(max(0.0, float(age))), spec, "" if tokens_used is not None else json.dumps(record)]


def batch(head: list[str], parts: list[tuple[list[str], list[str]]]) -> tuple[list[str], list[str]]:
    """One script call's KEYS and ARGV for many calls: each call's keys after the ones before it, and
    its arguments after where its keys begin."""
    keys: list[str] = []
    args = list(head)
    for part_keys, part_args in parts:
        args.append(str(len(keys)))
        args.extend(part_args)
        keys.extend(part_keys)
    return keys, args
