"""YAML -> ${ENV} interpolation -> validation -> Snapshot.

Loading either yields a complete Snapshot plus warnings, or raises
``ConfigError`` carrying every problem found, each naming its dotted path.
Secrets never enter a message: errors name the key, not its value.
"""

from __future__ import annotations

import datetime
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

import attrs
import yaml

from switchyard.config import (
    check_smart_routing,
    load_access,
    load_anthropic,
    load_extensions,
    load_metadata,
    load_params,
    load_prompts,
    load_resilience,
    load_responses_tools,
    load_simulation,
    load_smart_routing,
    load_telemetry,
    rules,
)
from switchyard.config.fields import load_section
from switchyard.config.operations import Admin, Logging, Tracing
from switchyard.config.resilience import Streaming
from switchyard.config.rules import Invalid, Problems, Reader, child
from switchyard.config.schema import (
    BackendConfig,
    BackendType,
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
from switchyard.config.values import bind_address, http_url, shown_url
from switchyard.config.telemetry import RoutingConfig
from switchyard.config.watch import content_revision

__all__ = ["ConfigError", "Loaded", "bind_address", "build_snapshot", "load_demo", "load_file", "load_text"]


class ConfigError(Exception):
    def __init__(self, source: str, errors: list[str], warnings: list[str] | None = None) -> None:
        self.source = source
        self.errors = errors
        self.warnings = warnings or []
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
        raise ConfigError(source, problems.errors, problems.warnings)
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

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


ANTHROPIC_URL = "https://api.anthropic.com"   # an anthropic backend's url when none is given


def anthropic_version(value: Any) -> str:
    """An ``anthropic-version`` date, YYYY-MM-DD (YAML reads an unquoted one as a date)."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()
    if not isinstance(value, str):
        raise Invalid(f"must be a date YYYY-MM-DD such as 2023-06-01, got {rules.type_name(value)}")
    text = rules.string(r"\d{4}-\d{2}-\d{2}", "a date YYYY-MM-DD such as 2023-06-01")(value)
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise Invalid(f"must be a real calendar date YYYY-MM-DD, got {text!r}") from None
    return text


def model_name(value: Any) -> str:
    text = rules.string()(value)
    if len(text) > 256 or any(ch.isspace() for ch in text):
        raise Invalid(f"must be a model name or glob without spaces, at most 256 characters, got {text!r}")
    return text


def build_snapshot(raw: Any, problems: Problems, base_dir: Path | None = None) -> Snapshot:
    top = Reader(raw, "", problems)
    metadata_file = top.get("model_metadata_file", rules.string(), None)
    metadata_dirs = top.get("model_metadata_dirs", rules.string_list(rules.string()), ())
    models = load_metadata.model_catalogue(metadata_file, metadata_dirs, base_dir or Path.cwd(), problems)
    server = load_section(ServerConfig, top.section("server"))
    backends = _backends(top, problems)
    strategy = top.get("selection_strategy", rules.one_of({s.value: s for s in Strategy}),
                       Strategy.ROUND_ROBIN)
    health = _health(top.section("health_checks"))
    chash = load_section(ConsistentHashConfig, top.section("consistent_hash"))
    prefix = load_section(PrefixRouting, top.section("prefix_routing"))
    timeouts = load_resilience.timeouts(top.section("timeouts"))
    retry = load_resilience.retry_policy(top.section("retry"))
    fallback = load_resilience.fallback(top.section("fallback"))
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
    smart = load_smart_routing.smart_routing(top.section("smart_routing"))
    responses_tools = load_responses_tools.responses_tools(top.section("responses_tools"))
    discovery = load_section(Discovery, top.section("discovery"))
    top.finish()

    if not top.raw.get("backends"):
        problems.error("backends", "at least one backend is required")
    elif not problems.errors and not any(b.enabled and not b.internal for b in backends):
        problems.warn("backends", "no enabled public backend: every chat request will get 404 or 503")
    if strategy is Strategy.PREFIX_AWARE_HASH and not prefix.enabled:
        problems.warn("prefix_routing.enabled",
                      "false while selection_strategy is PrefixAwareHash: requests go to the least-loaded backend")
    for b in backends:
        if b.type is not BackendType.SIMULATED and not b.models and not b.discovery:
            problems.warn(child("backends", backends.index(b)),
                          "no models listed and discovery off: this backend serves nothing")
    if not problems.errors:  # with errors, backends and chains may be incomplete
        load_resilience.check_chain_models(fallback, backends, problems)
        load_access.check_backends(api_keys, {b.name for b in backends}, problems)
        load_access.check_alias_reach(api_keys, backends, models.aliases, problems)
        load_prompts.check_backends(global_prompts, {b.name for b in backends}, problems)
        load_params.check_anthropic_sampling(request_params, backends, problems)
        check_smart_routing.check(smart, backends, api_keys, problems, server.max_concurrent_requests)
    load_telemetry.check(engine_stats, routing, backends, problems)
    return Snapshot(server=server, backends=backends, selection_strategy=strategy,
                    health_checks=health, consistent_hash=chash, prefix_routing=prefix,
                    timeouts=timeouts, discovery=discovery, retry=retry, fallback=fallback,
                    streaming=streaming, tracing=tracing, logging=logging_, admin=admin, proxy=proxy,
                    api_keys=api_keys, request_params=request_params, request_presets=request_presets,
                    global_prompts=global_prompts, dedup=dedup, engine_stats=engine_stats, routing=routing,
                    smart_routing=smart, responses_tools=responses_tools,
                    model_metadata_file=metadata_file, model_metadata_dirs=metadata_dirs, models=models)


def _backends(top: Reader, problems: Problems) -> tuple[BackendConfig, ...]:
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
    url = r.get("url", http_url, "")
    if not url:
        if btype is BackendType.SIMULATED:
            url = f"http://{name or 'backend'}.simulated"
        elif btype is BackendType.ANTHROPIC and not r.has("url"):
            url = ANTHROPIC_URL
        elif not r.has("url"):
            r.problems.error(child(r.path, "url"), f"is required for type {btype.value}")
    # An empty key means none, so `${OPENAI_API_KEY:-}` makes the key optional.
    api_key = r.get("api_key", rules.any_string, None) or None
    models = r.get("models", rules.string_list(model_name), ())
    weight = r.get("weight", rules.integer(1, 10_000), 1)
    enabled = r.get("enabled", rules.boolean, True)
    internal = r.get("internal", rules.boolean, False)
    discovery = r.get("discovery", rules.boolean, True)
    override = r.section("retry_override")  # `retry_override:` with no value is the same as absent
    retry_override = load_resilience.retry_policy(override, with_timeout=True) if r.has("retry_override") else None
    replay = r.get("replay", load_resilience.replay, True)
    entries = load_metadata.model_configs(r, chain_model_name=load_resilience.chain_model_name,
                                          model_name=model_name)
    model_metadata = {e.id: e.metadata for e in entries}
    model_configs = {e.id: load_metadata.routing_view(e.metadata) for e in entries}
    model_aliases = {e.id: e.aliases for e in entries if e.aliases}
    upstream_ids = {e.id: e.upstream_id for e in entries if e.upstream_id}
    extensions = load_extensions.request_extensions(r.section("request_extensions"))
    declared = load_telemetry.backend_fields(r)
    simulation = None
    section = r.section("simulation")   # read even when empty, so `simulation:` alone is no unknown key
    # An anthropic or azure backend on a *.simulated host is served in-process (protocol/wires/upstream.py: in_process).
    in_process = btype in (BackendType.ANTHROPIC, BackendType.AZURE) and \
        (urlsplit(url).hostname or "").endswith(".simulated")
    if btype is BackendType.SIMULATED or in_process:
        simulation = load_simulation.simulation(section)
    elif r.has("simulation"):
        r.problems.error(child(r.path, "simulation"), f"is only allowed on an {btype.value} backend whose url host "
                         "ends in .simulated" if btype in (BackendType.ANTHROPIC, BackendType.AZURE) else
                         "is only allowed on backends of type simulated")
    version = r.get("anthropic_version", anthropic_version, attrs.fields(BackendConfig).anthropic_version.default)
    if r.has("anthropic_version") and btype is not BackendType.ANTHROPIC:
        r.problems.error(child(r.path, "anthropic_version"),
                         f"only applies to backends of type anthropic, not {btype.value}")
    betas = load_anthropic.anthropic_betas(r, btype)
    r.finish()
    if btype is BackendType.AZURE and url and not urlsplit(url).path.rstrip("/").endswith("/openai/v1"):
        r.problems.error(child(r.path, "url"), "of an azure backend is its resource's v1 API root, "
                         f"https://NAME.openai.azure.com/openai/v1, got {shown_url(url)!r}")
    if btype is BackendType.SIMULATED and not (urlsplit(url).hostname or "").endswith(".simulated"):
        r.problems.error(child(r.path, "url"),
                         f"of a simulated backend must have a host ending in .simulated, got {shown_url(url)!r}")
    parts = urlsplit(url)
    if api_key and (parts.username or parts.password) and btype not in (BackendType.ANTHROPIC, BackendType.AZURE):
        # protocol/wires/upstream.py sends a user:password@ URL's credentials as Authorization: Basic, which
        # replaces the key's Authorization: Bearer (anthropic and azure send their key in another header).
        r.problems.error(child(r.path, "url"), f"carries credentials (user:password@) and {child(r.path, 'api_key')} "
                         "is set: every request would send the URL's credentials as 'Authorization: Basic' "
                         "instead of the key's 'Authorization: Bearer', so the key is never sent; keep one of them")
    if len(r.problems.errors) > errors_before:
        return None
    return BackendConfig(name=name, type=btype, url=url, api_key=api_key, models=models, weight=weight,
                         enabled=enabled, internal=internal, discovery=discovery, simulation=simulation,
                         retry_override=retry_override, replay=replay, model_configs=model_configs,
                         model_metadata=model_metadata, model_aliases=model_aliases, upstream_ids=upstream_ids,
                         request_extensions=extensions, anthropic_version=version, anthropic_betas=betas,
                         **declared)


def _health(r: Reader) -> HealthChecks:
    """Special only for its warning: a timeout longer than the interval."""
    out = load_section(HealthChecks, r)
    if out.timeout > out.interval:
        r.problems.warn(child(r.path, "timeout"),
                        "is longer than interval: a backend that does not answer is checked back to back")
    return out
