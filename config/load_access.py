"""Validation of ``api_keys``: the client keys of the data plane.

A key's secret comes from the environment (``key: ${TEAM_A_KEY}``); errors
name its path, never its value. The optional fields' rules are declared on
``ApiKey``; what stays here is special: ``id`` and ``key`` are required and
unique across keys, a short secret is warned about, and a key with an error
is left out.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Iterable, Mapping, Sequence

from switchyard.config import rules
from switchyard.config.access import KEY_ID, Access, ApiKey
from switchyard.config.fields import read
from switchyard.config.limits import Organization
from switchyard.config.mcp_servers import McpServer
from switchyard.config.rules import Invalid, Reader, child
from switchyard.config.schema import BackendConfig

MIN_KEY_LENGTH = 16


def _secret(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {rules.type_name(value)}")
    if not value:
        raise Invalid("must not be empty (is its environment variable set?)")
    if value != value.strip() or any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in value):
        raise Invalid("must be printable, without spaces or control characters")
    return value


def api_keys(top: Reader) -> Access:
    keys: list[ApiKey] = []
    ids: dict[str, str] = {}
    secrets: dict[str, str] = {}
    for r in top.items("api_keys"):
        errors_before = len(r.problems.errors)
        for required in ("id", "key"):
            if not r.has(required):
                r.problems.error(child(r.path, required), "is required")
        key_id = r.get("id", KEY_ID, "")
        secret = r.get("key", _secret, "")
        key = ApiKey(
            id=key_id,
            key=secret,
            organization_id=read(r, ApiKey, "organization_id"),
            allowed_models=read(r, ApiKey, "allowed_models"),
            allowed_backends=read(r, ApiKey, "allowed_backends"),
            tier=read(r, ApiKey, "tier"),
            rate_limit=read(r, ApiKey, "rate_limit"),
            budget=read(r, ApiKey, "budget"),
            allowed_mcp_servers=read(r, ApiKey, "allowed_mcp_servers"),
            allowed_mcp_tools=read(r, ApiKey, "allowed_mcp_tools"),
            cache=read(r, ApiKey, "cache"),
        )
        r.finish()
        if key_id in ids:
            r.problems.error(child(r.path, "id"), f"duplicate key id {key_id!r} (also {ids[key_id]})")
        elif key_id:
            ids[key_id] = r.path
        if secret in secrets:
            r.problems.error(child(r.path, "key"), f"the same secret as {secrets[secret]}; every key must differ")
        elif secret:
            secrets[secret] = r.path
            if len(secret) < MIN_KEY_LENGTH:
                r.problems.warn(child(r.path, "key"), f"is shorter than {MIN_KEY_LENGTH} characters; "
                                                      "use a long random secret")
        if len(r.problems.errors) == errors_before:
            keys.append(key)
    return Access.of(tuple(keys))


def check_backends(access: Access, backend_names: set[str], problems: rules.Problems) -> None:
    """A key may only name backends the config has (a typo would lock the key out silently)."""
    for i, key in enumerate(access.keys):
        for j, name in enumerate(key.allowed_backends or ()):
            if name not in backend_names:
                problems.error(f"api_keys[{i}].allowed_backends[{j}]", f"no backend is named {name!r}")


def check_mcp_servers(access: Access, organizations: Mapping[str, Organization], servers: Iterable[McpServer],
                      problems: rules.Problems) -> None:
    """Warn where a key's or an organization's ``allowed_mcp_servers`` names, without a glob, a server
    ``mcp_servers`` does not configure: a typo that reaches nothing (a warning, not an error: a server may be
    added later, and until then the list simply allows nothing more)."""
    names = {s.name for s in servers}
    owners = [(f"api_keys[{i}]", f"key {key.id!r}", key.allowed_mcp_servers) for i, key in enumerate(access.keys)]
    owners += [(f"organizations[{i}]", f"organization {org.id!r}", org.allowed_mcp_servers)
               for i, org in enumerate(organizations.values())]
    for path, who, allowed in owners:
        for j, name in enumerate(allowed or ()):
            if not any(ch in name for ch in "*?[") and name not in names:
                problems.warn(f"{path}.allowed_mcp_servers[{j}]",
                              f"{who}: no server of mcp_servers is named {name!r}, so this entry allows nothing")


def dispatch_aliases(backends: Iterable[BackendConfig], catalogue: Mapping[str, str]) -> dict[str, str]:
    """Exact alias -> canonical id, as alias dispatch reads them (``actors/routing/aliases.py``):
    enabled backends' ``model_configs[].aliases`` before the metadata files'; ``*`` aliases never dispatch."""
    out: dict[str, str] = {}
    layers = [(a, m) for b in backends if b.enabled for m, names in b.model_aliases.items() for a in names]
    for alias, model in [*layers, *catalogue.items()]:
        if "*" not in alias and alias != model:
            out.setdefault(alias, model)
    return out


def check_alias_reach(access: Access, backends: Iterable[BackendConfig], catalogue: Mapping[str, str],
                      problems: rules.Problems) -> None:
    """Warn where a key's glob admits an alias but not the model it dispatches to.

    The requested name is what is judged (docs/access.md), so such a glob widens
    the key's reach to the canonical model: as specified, but easy to miss. An
    alias the list names exactly was meant, and is not warned about."""
    aliases = dispatch_aliases(backends, catalogue)
    for i, key in enumerate(access.keys):
        if key.allowed_models is None:
            continue
        for alias, model in sorted(aliases.items()):
            if alias in key.allowed_models or not key.allows_model(alias) or key.allows_model(model):
                continue
            globs = ", ".join(repr(p) for p in key.allowed_models if fnmatchcase(alias, p))
            problems.warn(f"api_keys[{i}].allowed_models",
                          f"key {key.id!r}: {globs} matches the alias {alias!r}, which is routed as {model!r}, "
                          f"a model the list does not match: this key can reach {model!r} through the alias; "
                          f"narrow the glob, or list {model!r} to make it explicit")


MATCH_EVERYTHING = ("*", "models/*")   # entries that match every model name (actors/routing/aliases.py)


def check_catch_all(backends: Sequence[BackendConfig], catalogue: Mapping[str, str],
                    problems: rules.Problems) -> None:
    """Warn about a discovery-off backend's ``models`` entry that matches every name (``*``, ``models/*``)
    while other backends serve the canonical ids of aliases (the spec asks ``config validate`` to say so).

    Such an entry keeps no name on its backend (alias dispatch does not count it), so a request for a
    metadata alias is routed as its canonical id; and the backend, serving every name, is then a candidate
    for that id beside the backends that really serve it: it takes a share of the alias's calls from them,
    and does not keep the alias's calls a client meant for it either. (With discovery on, the entry serves
    what the backend lists, like any list.)"""
    public = [b for b in backends if b.enabled and not b.internal]
    aliases = dispatch_aliases(backends, catalogue)
    for i, b in enumerate(backends):
        if b not in public or b.discovery:
            continue
        for j, entry in enumerate(b.models):
            if entry not in MATCH_EVERYTHING:
                continue
            served = [(alias, model, o.name) for alias, model in sorted(aliases.items()) for o in public
                      if o is not b and model in o.exact_models]
            if not served:
                continue
            alias, model, other = served[0]
            problems.warn(f"backends[{i}].models[{j}]",
                          f"{entry!r} matches every model name: a request for an alias such as {alias!r} is routed "
                          f"as its canonical id {model!r}, to this backend as much as to {other!r}, which serves "
                          f"it ({len({a for a, _, _ in served})} alias(es) so routed); list the models this "
                          f"backend serves, or a narrower glob, to keep each name where it belongs")
