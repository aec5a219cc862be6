"""Loading ``backends``: special, because what a backend may say depends on its type.

The plain fields' rules and defaults are declared on ``BackendConfig``
(``schema.py``) and read one by one with ``fields.read``; what a type
implies is its kind's (``config/kinds/``): the url it defaults to or
requires and the rule its url follows, whether a ``unix://`` socket may name
it, ``simulation`` only where it runs in process, the keys only it takes
(each an error on any other kind) and its own checks of them, whether its
key can travel beside a url's credentials. What stays here: duplicate
names, and a backend with errors left out of the result.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from switchyard.config import load_extensions, load_metadata, load_resilience, rules, values
from switchyard.config.fields import load_section, read
from switchyard.config.kinds import KEYS, KINDS, foreign_key, listed, types_where
from switchyard.config.kinds.base import Draft, InProcess, Kind, read_own
from switchyard.config.rules import Problems, Reader, child
from switchyard.config.schema import BackendConfig, BackendType
from switchyard.config.simulation import Simulation, check_simulation
from switchyard.config.unix_socket import backend_url, is_unix

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


def backends(top: Reader, problems: Problems) -> tuple[BackendConfig, ...]:
    out: list[BackendConfig] = []
    seen: dict[str, str] = {}
    for r in top.items("backends"):
        name = r.raw.get("name")
        if isinstance(name, str) and name in seen:
            problems.error(child(r.path, "name"), f"duplicate backend name {name!r} (also {seen[name]})")
        elif isinstance(name, str):
            seen[name] = r.path
        backend = _backend(r)
        if backend is not None:
            out.append(backend)
    return tuple(out)


def _backend(r: Reader) -> BackendConfig | None:
    errors_before = len(r.problems.errors)
    if not r.has("name"):
        r.problems.error(child(r.path, "name"), "is required")
    name = r.get("name", rules.string(_NAME, "1-64 letters, digits, '.', '_' or '-'"), "")
    btype = r.get("type", rules.one_of({t.value: t for t in BackendType}), BackendType.GENERIC)
    kind = KINDS[btype]
    url = r.get("url", backend_url, "")
    if not url:
        if kind.default_url is not None:
            url = kind.default_url.format(name=name or "backend")
        elif kind.url_required and not r.has("url"):
            r.problems.error(child(r.path, "url"), f"is required for type {btype.value}")
    # An empty key means none, so `${OPENAI_API_KEY:-}` makes the key optional.
    api_key = read(r, BackendConfig, "api_key") or None
    models = read(r, BackendConfig, "models")
    weight = read(r, BackendConfig, "weight")
    enabled = read(r, BackendConfig, "enabled")
    internal = read(r, BackendConfig, "internal")
    discovery = read(r, BackendConfig, "discovery") and kind.model_list is not None   # else never asked
    override = r.section("retry_override")  # `retry_override:` with no value is the same as absent
    retry_override = load_resilience.retry_policy(override, with_timeout=True) if r.has("retry_override") else None
    replay = read(r, BackendConfig, "replay")
    entries = load_metadata.model_configs(r, chain_model_name=load_resilience.chain_model_name,
                                          model_name=values.model_name)
    model_metadata = {e.id: e.metadata for e in entries}
    model_configs = {e.id: load_metadata.routing_view(e.metadata) for e in entries}
    model_aliases = {e.id: e.aliases for e in entries if e.aliases}
    upstream_ids = {e.id: e.upstream_id for e in entries if e.upstream_id}
    extensions = load_extensions.request_extensions(r.section("request_extensions"))
    declared = {key: read(r, BackendConfig, key) for key in ("provider_tpm", "provider_rpm", "engine_stats_url")}
    simulation = _simulation(r, kind, url)
    draft = kind.settle(r, Draft(url=url, models=models, api_key=api_key, own=_own_keys(r, kind)))
    url = draft.url
    r.finish()
    if is_unix(url) and not kind.unix_socket:
        r.problems.error(child(r.path, "url"), f"is a unix:// socket, which only the OpenAI-compatible types "
                         f"take ({listed(types_where(lambda k: k.unix_socket))}), not {btype.value}")
    elif (wrong := kind.url_rule(url)) is not None:
        r.problems.error(child(r.path, "url"), wrong)
    parts = urlsplit(url)
    if api_key and (parts.username or parts.password) and kind.auth.basic_replaces_key:
        # protocol/wires/upstream.py sends a user:password@ URL's credentials as Authorization: Basic, which
        # replaces the key's Authorization: Bearer (kinds whose key goes in another header keep both).
        r.problems.error(child(r.path, "url"), f"carries credentials (user:password@) and {child(r.path, 'api_key')} "
                         "is set: every request would send the URL's credentials as 'Authorization: Basic' "
                         "instead of the key's 'Authorization: Bearer', so the key is never sent; keep one of them")
    if len(r.problems.errors) > errors_before:
        return None
    return BackendConfig(name=name, type=btype, url=url, api_key=api_key, models=models, weight=weight,
                         enabled=enabled, internal=internal, discovery=discovery, simulation=simulation,
                         retry_override=retry_override, replay=replay, model_configs=model_configs,
                         model_metadata=model_metadata, model_aliases=model_aliases, upstream_ids=upstream_ids,
                         request_extensions=extensions, **declared, **draft.own)


def _simulation(r: Reader, kind: Kind, url: str) -> Simulation | None:
    """``simulation``, read where the kind runs in process (always, or on a ``*.simulated`` host)."""
    section = r.section("simulation")   # read even when empty, so `simulation:` alone is no unknown key
    on_host = kind.in_process is InProcess.SIMULATED_HOST
    if kind.in_process is InProcess.ALWAYS or on_host and (urlsplit(url).hostname or "").endswith(".simulated"):
        simulation = load_section(Simulation, section, check_simulation)
        if simulation.engine_kv is not None and on_host:   # a provider's API, not an engine the operator runs
            r.problems.error(child(child(r.path, "simulation"), "engine_kv"),
                             "is only allowed on backends of type "
                             f"{listed(types_where(lambda k: k.in_process is InProcess.ALWAYS))}")
        return simulation
    if r.has("simulation"):
        always = listed(types_where(lambda k: k.in_process is InProcess.ALWAYS))
        r.problems.error(child(r.path, "simulation"), f"is only allowed on an {kind.type.value} backend whose url "
                         "host ends in .simulated" if on_host else f"is only allowed on backends of type {always}")
    return None


def _own_keys(r: Reader, kind: Kind) -> dict[str, Any]:
    """The kind's own keys as their rules read them; every other kind's key is read too (a bad value is
    reported) and refused."""
    own: dict[str, Any] = {}
    for key in KEYS:
        value = read_own(r, key)
        if kind.owns(key.name):
            own[key.name] = value
        elif r.has(key.name):
            r.problems.error(child(r.path, key.name), foreign_key(key, kind))
    return own
