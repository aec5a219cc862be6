"""What ``GET /admin/keys/{id}`` shows of one key from the counters in Redis: one read-only script
call (``view`` in limits.lua) for the key's and its organization's windows, leases and budgets, read
into the pure core's Counters so the view is the local limiter's, field for field."""

from __future__ import annotations

import json
import math
from typing import Any, Awaitable, Callable, Mapping

from switchyard.actors.routing import limits as core
from switchyard.actors.routing.budget_periods import Bucket, bucket_of
from switchyard.config.limits import Organization
from switchyard.config.schema import Snapshot
from switchyard.protocol.stores.redis_script import (
    RATE_DIMENSIONS,
    Keys,
    budget_key,
    budget_state,
    lease_key,
    rate_key,
)

Op = Callable[..., Awaitable[Any]]
Seed = Callable[[list[tuple[core.BudgetLine, Bucket]], float], Awaitable[bool]]


async def shared_view(op: Op, seed: Seed, now_arg: str, snapshot: Snapshot, key: Any, wall: float,
                      organizations: Mapping[str, Organization] | None = None) -> dict[str, Any]:
    """The key's view; ``op`` runs a script (raising RedisUnavailable), ``seed`` seeds missing budget
    counters from the ledger (as an admission does), ``now_arg`` is the script's "now" ('' : Redis TIME)."""
    orgs = snapshot.organizations if organizations is None else organizations
    scopes = {s.kind: s for s in core.scopes_for(snapshot.rate_limiting, orgs, key, None, None)}
    org = orgs.get(key.organization_id) if key.organization_id is not None else None
    owners = [("key", key.id, key.budget), ("organization", key.organization_id, org.budget if org else None)]
    lines = [(owner, owner_id, budget, bucket_of(budget.period, wall))
             for owner, owner_id, budget in owners if budget is not None and owner_id is not None]
    shown = [s for s in (scopes.get("key"), scopes.get("organization")) if s is not None]
    keys = Keys()
    tats = [(s, d, keys.add(rate_key(s.kind, s.name, d))) for s in shown for d in RATE_DIMENSIONS
            if getattr(s.limit, d) is not None]
    leases = [(s, keys.add(lease_key(s.kind, s.name))) for s in shown if s.limit.max_concurrent is not None]
    budgets = [(line, keys.add(budget_key(line[0], line[1], line[3].name))) for line in lines]
    spec = json.dumps({"t": [i for *_, i in tats], "l": [i for _, i in leases], "b": [i for _, i in budgets]})
    for attempt in range(2):
        reply = await op("view", keys.keys, [now_arg, spec])
        pos = 1 + len(tats) + len(leases)
        missing = []
        for line, _ in budgets:
            if reply[pos] == "":
                missing.append(line)
                pos += 1
            else:
                pos += 4
        if not missing or attempt or not await seed(
                [(core.BudgetLine(o, i, b, 0.0, 0), bucket) for o, i, b, bucket in missing], wall):
            break
    now = float(reply[0])
    c = core.Counters()
    pos = 1
    for s, d, _ in tats:
        if reply[pos] != "":
            c.tat[(s.kind, s.name, d)] = float(reply[pos])
        pos += 1
    for s, _ in leases:
        c.leases[(s.kind, s.name)] = {f"held-{j}": math.inf for j in range(int(reply[pos]))}
        pos += 1
    seeded: dict[tuple[str, str], bool] = {}
    for (owner, owner_id, _, bucket), _ in budgets:
        if reply[pos] == "":
            seeded[(owner, owner_id)] = False
            pos += 1
            continue
        c.budgets[(owner, owner_id, bucket.name)] = budget_state(reply[pos:pos + 4])
        seeded[(owner, owner_id)] = True
        pos += 4

    def scope(kind: str) -> dict[str, Any] | None:
        s = scopes.get(kind)
        return None if s is None else core.scope_view(c, s.kind, s.name, s.limit, now)

    def budget(owner: str, owner_id: str, b: Any) -> dict[str, Any] | None:
        if b is None:
            return None
        view = core.budget_view(c, owner, owner_id, b, wall)
        view["seeded"] = seeded.get((owner, owner_id), False)
        return view

    out: dict[str, Any] = {"id": key.id, "organization_id": key.organization_id, "share": 1, "store": "redis",
                           "rate_limit": scope("key"), "budget": budget("key", key.id, key.budget)}
    if key.organization_id is not None:
        out["organization"] = {"id": key.organization_id, "rate_limit": scope("organization"),
                               "budget": budget("organization", key.organization_id,
                                                org.budget if org is not None else None)}
    return out
