"""YAML -> ${ENV} interpolation -> validation -> Snapshot.

Loading either yields a complete Snapshot plus warnings, or raises
``ConfigError`` carrying every problem found, each naming its dotted path.
Secrets never enter a message: errors name the key, not its value.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import attrs
import yaml

from switchyard.config import (
    builtin_metadata,
    cache_injection,
    check_guardrails,
    check_smart_routing,
    load_access,
    load_backends,
    load_limits,
    load_metadata,
    load_params,
    load_prompts,
    load_resilience,
    load_responses_tools,
    load_smart_routing,
    load_telemetry,
    self_address,
)
from switchyard.config import response_cache as load_cache
from switchyard.config.alerts import alerts as load_alerts
from switchyard.config.batches import batches as load_batches
from switchyard.config.fields import load_section, read
from switchyard.config.guardrails import guardrails as load_guardrails
from switchyard.config.kinds import kind_of
from switchyard.config.kinds.base import Api, InProcess
from switchyard.config.kv_cache_index import check as check_kv_cache_index
from switchyard.config.kv_cache_index import kv_cache_index as load_kv_cache_index
from switchyard.config.mcp_servers import McpTools
from switchyard.config.mcp_servers import mcp_servers as load_mcp_servers
from switchyard.config.operations import Admin, Logging, Tracing
from switchyard.config.resilience import Streaming
from switchyard.config.rules import Problems, Reader, child
from switchyard.config.schema import (
    ConsistentHashConfig,
    Dedup,
    Discovery,
    HealthChecks,
    PrefixRouting,
    Proxy,
    ServerConfig,
    Snapshot,
    Strategy,
)
from switchyard.config.stored_responses import StoredResponses
from switchyard.config.telemetry import RoutingConfig
from switchyard.config.usage import UsageConfig
from switchyard.config.watch import content_revision
from switchyard.config.web_search import web_search as load_web_search

__all__ = ["ConfigError", "Loaded", "build_snapshot", "load_demo", "load_file", "load_text"]


class ConfigError(Exception):
    def __init__(self, source: str, errors: list[str], warnings: list[str] | None = None,
                 unsupported: list[str] | None = None) -> None:
        self.source = source
        self.errors = errors
        self.warnings = warnings or []
        self.unsupported = unsupported or []   # the contract keys among the errors (config/contract.py)
        super().__init__(f"{source}: {len(errors)} configuration error(s):\n  " + "\n  ".join(errors))


@attrs.frozen
class Loaded:
    snapshot: Snapshot
    warnings: tuple[str, ...]


def load_file(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Loaded:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(p), [f"<file>: cannot read: {exc.strerror or exc}"]) from None
    return load_text(text, source=str(p), env=env, base_dir=p.absolute().parent)


def load_demo() -> Loaded:
    text = resources.files(__package__).joinpath("demo.yaml").read_text(encoding="utf-8")
    return load_text(text, source="<embedded demo config>")


def load_text(text: str, *, source: str = "<string>", env: Mapping[str, str] | None = None,
              base_dir: str | os.PathLike[str] | None = None) -> Loaded:
    """``base_dir`` (default: the working directory) is where relative metadata paths and
    ``model-metadata.d/`` are looked up: the config file's directory."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "<yaml>"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [f"<yaml> {where}: {problem}"]) from None
    problems = Problems()
    raw = interpolate(raw, "", os.environ if env is None else env, problems)
    snapshot = build_snapshot(raw, problems, base_dir=Path(base_dir) if base_dir is not None else Path.cwd())
    if problems.errors:
        raise ConfigError(source, problems.errors, problems.warnings, problems.unsupported)
    revision = content_revision(text + load_metadata.files_digest(snapshot.models.files))
    return Loaded(attrs.evolve(snapshot, revision=revision, source=source), tuple(problems.warnings))


# --- ${ENV} interpolation --------------------------------------------------

_ENV_REF = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate(value: Any, path: str, env: Mapping[str, str], problems: Problems) -> Any:
    """Replace ``${NAME}`` / ``${NAME:-default}`` in every string; ``$$`` is a literal ``$``."""
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "$$":
                return "$"
            name, default = m.group(1), m.group(2)
            if env.get(name):
                return env[name]
            if name in env and default is None:
                return ""
            if default is not None:  # shell semantics: `:-` also covers a set but empty variable
                return default
            problems.error(path or "<top level>", f"environment variable {name} is not set")
            return ""
        return _ENV_REF.sub(sub, value)
    if isinstance(value, list):
        return [interpolate(v, child(path, i), env, problems) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: interpolate(v, child(path, str(k)), env, problems) for k, v in value.items()}
    return value


# --- sections ----------------------------------------------------------------

def build_snapshot(raw: Any, problems: Problems, base_dir: Path | None = None) -> Snapshot:
    top = Reader(raw, "", problems)
    metadata_file = read(top, Snapshot, "model_metadata_file")
    metadata_dirs = read(top, Snapshot, "model_metadata_dirs")
    server = load_section(ServerConfig, top.section("server"))
    backends = load_backends.backends(top, problems)
    # the built-in layer lowest; a backend's model_configs alias that names a built-in id takes it over
    reserved = frozenset(a for b in backends for names in b.model_aliases.values() for a in names)
    models = load_metadata.model_catalogue(metadata_file, metadata_dirs, base_dir or Path.cwd(), problems,
                                           builtin=builtin_metadata.entries(), reserved=reserved)
    strategy = read(top, Snapshot, "selection_strategy")
    health = _health(top.section("health_checks"))
    chash = load_section(ConsistentHashConfig, top.section("consistent_hash"))
    prefix_reader = top.section("prefix_routing")
    prefix = load_section(PrefixRouting, prefix_reader,
                          anthropic_cache_control_injection=cache_injection.read(prefix_reader))
    timeouts = load_resilience.timeouts(top.section("timeouts"))
    retry = load_resilience.retry_policy(top.section("retry"))
    fallback = load_resilience.fallback(top.section("fallback"))
    circuit_breaker = load_resilience.circuit_breaker(top.section("circuit_breaker"))
    streaming = load_section(Streaming, top.section("streaming"))
    tracing = load_section(Tracing, top.section("tracing"))
    logging_ = load_section(Logging, top.section("logging"))
    admin = load_section(Admin, top.section("admin"))
    proxy = load_section(Proxy, top.section("proxy"))
    api_keys = load_access.api_keys(top)
    request_params = load_params.request_params(top.section("request_params"))
    request_presets = load_params.request_presets(top.section("request_presets"))
    global_prompts = load_prompts.global_prompts(top.section("global_prompts"), base_dir or Path.cwd())
    dedup = load_section(Dedup, top.section("dedup"))
    engine_stats = load_telemetry.engine_stats(top.section("engine_stats"))
    routing = load_section(RoutingConfig, top.section("routing"))
    kv_index = load_kv_cache_index(top.section("kv_cache_index"), base_dir or Path.cwd(),
                                   [b.name for b in backends])
    smart = load_smart_routing.smart_routing(top.section("smart_routing"))
    responses_tools = load_responses_tools.responses_tools(top.section("responses_tools"))
    stored_responses = load_section(StoredResponses, top.section("stored_responses"))
    discovery = load_section(Discovery, top.section("discovery"))
    usage = load_section(UsageConfig, top.section("usage"))
    rate_limiting = load_limits.rate_limiting(top.section("rate_limiting"))
    organizations = load_limits.organizations(top)
    state = load_limits.state(top.section("state"), server)
    response_cache = load_section(load_cache.ResponseCacheConfig, top.section("response_cache"),
                                  lambda c, r: load_cache.check(c, state, r))
    load_cache.check_targets(response_cache, tuple(backends), global_prompts, problems)
    guardrails = load_guardrails(top)
    alerts = load_alerts(top.section("alerts"))
    batches = load_batches(top.section("batches"))
    web_search = load_web_search(top)
    mcp_servers = load_mcp_servers(top)
    mcp_tools = load_section(McpTools, top.section("mcp_tools"))
    top.finish()

    if not top.raw.get("backends"):
        problems.error("backends", "at least one backend is required")
    elif not problems.errors and not any(b.enabled and not b.internal for b in backends):
        problems.warn("backends", "no enabled public backend: every chat request will get 404 or 503")
    if strategy is Strategy.PREFIX_AWARE_HASH and not prefix.enabled:
        problems.warn("prefix_routing.enabled",
                      "false while selection_strategy is PrefixAwareHash: requests go to the least-loaded backend")
    if routing.cache_affinity.enabled and routing.cache_affinity.key == "prefix" and not prefix.enabled:
        problems.warn("routing.cache_affinity.key",
                      "prefix while prefix_routing.enabled is false: no prefix is taken, so no call has an "
                      "affinity key")
    for b in backends:
        # an always-simulated kind is a test double: serving nothing is no deployment's mistake there
        if kind_of(b).in_process is not InProcess.ALWAYS and not b.models and not b.discovery:
            problems.warn(child("backends", backends.index(b)),
                          "no models listed and discovery off: this backend serves nothing")
    self_address.check(backends, server.bind_address, problems)
    if not problems.errors:  # with errors, backends and chains may be incomplete
        load_resilience.check_chain_models(fallback, backends, problems)
        load_access.check_backends(api_keys, {b.name for b in backends}, problems)
        load_access.check_mcp_servers(api_keys, organizations, mcp_servers, problems)
        load_access.check_alias_reach(api_keys, backends, models.aliases, problems)
        load_access.check_catch_all(backends, models.aliases, problems)
        load_prompts.check_backends(global_prompts, {b.name for b in backends}, problems)
        load_params.check_narrowed(request_params, backends, problems)
        cache_injection.check(prefix.anthropic_cache_control_injection, backends, problems,
                              lambda b: kind_of(b).api in (Api.MESSAGES, Api.CONVERSE))
        check_smart_routing.check(smart, backends, api_keys, problems, server.max_concurrent_requests)
        check_guardrails.check(guardrails, backends, load_access.dispatch_aliases(backends, models.aliases), problems)
        load_limits.check_per_model(rate_limiting, backends, load_access.dispatch_aliases(backends, models.aliases),
                                    problems)
    load_telemetry.check(engine_stats, routing, backends, problems)
    check_kv_cache_index(kv_index, prefix.enabled, problems)
    return Snapshot(server=server, backends=backends, selection_strategy=strategy,
                    health_checks=health, consistent_hash=chash, prefix_routing=prefix,
                    timeouts=timeouts, discovery=discovery, retry=retry, fallback=fallback,
                    circuit_breaker=circuit_breaker,
                    streaming=streaming, tracing=tracing, logging=logging_, admin=admin, proxy=proxy,
                    api_keys=api_keys, request_params=request_params, request_presets=request_presets,
                    global_prompts=global_prompts, dedup=dedup, engine_stats=engine_stats, routing=routing,
                    kv_cache_index=kv_index, smart_routing=smart, responses_tools=responses_tools,
                    stored_responses=stored_responses,
                    model_metadata_file=metadata_file, model_metadata_dirs=metadata_dirs, models=models,
                    usage=usage, rate_limiting=rate_limiting, organizations=organizations, state=state,
                    guardrails=guardrails, response_cache=response_cache, alerts=alerts, batches=batches,
                    web_search=web_search, mcp_servers=mcp_servers, mcp_tools=mcp_tools)


def _health(r: Reader) -> HealthChecks:
    """Special only for its warning: a timeout longer than the interval."""
    out = load_section(HealthChecks, r)
    if out.timeout > out.interval:
        r.problems.warn(child(r.path, "timeout"),
                        "is longer than interval: a backend that does not answer is checked back to back")
    return out
