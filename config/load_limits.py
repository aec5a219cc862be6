"""Validation of ``rate_limiting``, ``organizations`` and ``state``.

What the declared fields cannot say stays here: ``per_model`` is keyed by
model name, organization ids are required and unique, ``state.fleet_workers``
defaults to ``server.workers``, and a ``per_model`` entry naming a model no
backend lists is warned about (it would never apply). ``workers_refusal``
is the start rule the serving layer enforces where the worker count is known.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterable, Mapping

from switchyard.config import rules, values
from switchyard.config.fields import load_section, read
from switchyard.config.limits import Organization, RateLimit, RateLimiting, State, _names_a_limit
from switchyard.config.rules import Invalid, Problems, Reader, child
from switchyard.config.schema import BackendConfig, ServerConfig, Snapshot

_ID = r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}"


def rate_limiting(r: Reader) -> RateLimiting:
    per_model: dict[str, RateLimit] = {}
    models = r.section("per_model")
    for name in models.raw:
        path = child(models.path, str(name))
        try:
            model = values.model_name(name)
        except Invalid as exc:
            r.problems.error(path, f"model name {exc}")
            continue
        if "*" in model or "?" in model or "[" in model:
            r.problems.error(path, "must be one model's name, not a glob (limits are per model that runs)")
            continue
        per_model[model] = load_section(RateLimit, models.section(model), _names_a_limit)
    return load_section(RateLimiting, r, None, per_model=per_model)


def organizations(top: Reader) -> dict[str, Organization]:
    out: dict[str, Organization] = {}
    paths: dict[str, str] = {}
    for r in top.items("organizations"):
        if not r.has("id"):
            r.problems.error(child(r.path, "id"), "is required")
        org_id = r.get("id", rules.string(_ID, "1-128 letters, digits, '.', '_', ':', '@' or '-'"), "")
        org = load_section(Organization, r, None, id=org_id)
        if org_id in paths:
            r.problems.error(child(r.path, "id"), f"duplicate organization id {org_id!r} (also {paths[org_id]})")
        elif org_id:
            paths[org_id] = r.path
            out[org_id] = org
    return out


def state(r: Reader, server: ServerConfig) -> State:
    return load_section(State, r, None, fleet_workers=read(r, State, "fleet_workers", server.workers))


def check_per_model(limits: RateLimiting, backends: Iterable[BackendConfig], aliases: Mapping[str, str],
                    problems: Problems) -> None:
    """Warn where a ``per_model`` entry names a model no enabled backend lists (by name or glob):
    it is judged on the model that runs, so an alias or a typo never applies."""
    enabled = [b for b in backends if b.enabled]
    for model in limits.per_model:
        if any(model in b.models or model in b.model_configs or any(fnmatchcase(model, g) for g in b.model_globs)
               for b in enabled):
            continue
        path = child("rate_limiting.per_model", model)
        if model in aliases:
            problems.warn(path, f"is an alias of {aliases[model]!r}; limits apply to the model that runs: "
                                f"name {aliases[model]!r} instead")
        else:
            problems.warn(path, "no enabled backend lists this model: the limit applies only if a backend "
                                "discovers it")


def workers_refusal(snapshot: Snapshot, workers: int) -> str | None:
    """Why ``workers`` workers may not start with this config, or None.

    Counters kept in each worker's memory would let every worker allow the
    whole limit: N times it in all. Refusing is safer than silently dividing.
    """
    if workers > 1 and snapshot.limits_enabled and snapshot.state.redis_url is None:
        return (f"rate_limiting/budgets with {workers} workers need state.redis_url (each worker would "
                f"otherwise allow the whole limit: {workers} times it in all); set it, or run one worker")
    return None
