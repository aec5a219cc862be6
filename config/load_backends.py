"""Loading ``backends``: special, because what a backend may say depends on its type.

The plain fields' rules and defaults are declared on ``BackendConfig``
(``schema.py``) and read one by one with ``fields.read``; what stays here is
per-type logic a walk cannot express: the url a type implies or requires,
``simulation`` only on simulated hosts, ``anthropic_version`` and
``anthropic_betas`` only on anthropic, ``stream_usage`` only on the
OpenAI-wire types, an azure url's shape, credentials in a url next to an
``api_key``, duplicate names, and a backend with errors left out of the
result.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from switchyard.config import (
    load_anthropic,
    load_bedrock,
    load_extensions,
    load_metadata,
    load_resilience,
    rules,
    values,
)
from switchyard.config.fields import load_section, read
from switchyard.config.rules import Problems, Reader, child
from switchyard.config.schema import OPENAI_WIRE_TYPES, BackendConfig, BackendType
from switchyard.config.simulation import Simulation
from switchyard.config.unix_socket import backend_url, is_unix
from switchyard.config.values import shown_url

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
ANTHROPIC_URL = "https://api.anthropic.com"   # an anthropic backend's url when none is given
GEMINI_URL = "https://generativelanguage.googleapis.com"   # a gemini backend's (its paths carry /v1beta)
# The types a `unix://` url may name: the OpenAI-compatible ones (config/unix_socket.py).
UNIX_SOCKET_TYPES = (BackendType.OPENAI, BackendType.VLLM, BackendType.SGLANG, BackendType.OLLAMA,
                     BackendType.GENERIC)


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
    url = r.get("url", backend_url, "")
    if not url:
        if btype is BackendType.SIMULATED:
            url = f"http://{name or 'backend'}.simulated"
        elif btype is BackendType.ANTHROPIC and not r.has("url"):
            url = ANTHROPIC_URL
        elif btype is BackendType.GEMINI and not r.has("url"):
            url = GEMINI_URL
        elif btype is BackendType.BEDROCK and not r.has("url"):
            pass   # its region's runtime (load_bedrock.py)
        elif not r.has("url"):
            r.problems.error(child(r.path, "url"), f"is required for type {btype.value}")
    # An empty key means none, so `${OPENAI_API_KEY:-}` makes the key optional.
    api_key = read(r, BackendConfig, "api_key") or None
    models = read(r, BackendConfig, "models")
    weight = read(r, BackendConfig, "weight")
    enabled = read(r, BackendConfig, "enabled")
    internal = read(r, BackendConfig, "internal")
    url, region, aws_profile = load_bedrock.bedrock_fields(r, btype, url, models, api_key)
    discovery = read(r, BackendConfig, "discovery") and btype is not BackendType.BEDROCK   # never asked
    override = r.section("retry_override")  # `retry_override:` with no value is the same as absent
    retry_override = load_resilience.retry_policy(override, with_timeout=True) if r.has("retry_override") else None
    replay = read(r, BackendConfig, "replay")
    stream_usage = read(r, BackendConfig, "stream_usage")
    if r.has("stream_usage") and btype not in OPENAI_WIRE_TYPES:
        r.problems.error(child(r.path, "stream_usage"), f"only applies to backends spoken to in OpenAI's wire "
                         f"({', '.join(t.value for t in BackendType if t in OPENAI_WIRE_TYPES)}), not "
                         f"{btype.value}: its own stream reports usage")
    entries = load_metadata.model_configs(r, chain_model_name=load_resilience.chain_model_name,
                                          model_name=values.model_name)
    model_metadata = {e.id: e.metadata for e in entries}
    model_configs = {e.id: load_metadata.routing_view(e.metadata) for e in entries}
    model_aliases = {e.id: e.aliases for e in entries if e.aliases}
    upstream_ids = {e.id: e.upstream_id for e in entries if e.upstream_id}
    extensions = load_extensions.request_extensions(r.section("request_extensions"))
    declared = {key: read(r, BackendConfig, key) for key in ("provider_tpm", "provider_rpm", "engine_stats_url")}
    simulation = None
    section = r.section("simulation")   # read even when empty, so `simulation:` alone is no unknown key
    # An anthropic or azure backend on a *.simulated host is served in-process (protocol/wires/upstream.py: in_process).
    in_process = btype in (BackendType.ANTHROPIC, BackendType.AZURE) and \
        (urlsplit(url).hostname or "").endswith(".simulated")
    if btype is BackendType.SIMULATED or in_process:
        simulation = load_section(Simulation, section)
    elif r.has("simulation"):
        r.problems.error(child(r.path, "simulation"), f"is only allowed on an {btype.value} backend whose url host "
                         "ends in .simulated" if btype in (BackendType.ANTHROPIC, BackendType.AZURE) else
                         "is only allowed on backends of type simulated")
    version = read(r, BackendConfig, "anthropic_version")
    if r.has("anthropic_version") and btype is not BackendType.ANTHROPIC:
        r.problems.error(child(r.path, "anthropic_version"),
                         f"only applies to backends of type anthropic, not {btype.value}")
    betas = load_anthropic.anthropic_betas(r, btype)
    r.finish()
    if btype is BackendType.GEMINI and url.rstrip("/").endswith("/v1beta"):
        url = url.rstrip("/")[:-len("/v1beta")]   # the wire adds the version to every path
    if is_unix(url) and btype not in UNIX_SOCKET_TYPES:
        r.problems.error(child(r.path, "url"), f"is a unix:// socket, which only the OpenAI-compatible types "
                         f"take ({', '.join(t.value for t in UNIX_SOCKET_TYPES)}), not {btype.value}")
    elif btype is BackendType.AZURE and url and not urlsplit(url).path.rstrip("/").endswith("/openai/v1"):
        r.problems.error(child(r.path, "url"), "of an azure backend is its resource's v1 API root, "
                         f"https://NAME.openai.azure.com/openai/v1, got {shown_url(url)!r}")
    elif btype is BackendType.SIMULATED and not (urlsplit(url).hostname or "").endswith(".simulated"):
        r.problems.error(child(r.path, "url"),
                         f"of a simulated backend must have a host ending in .simulated, got {shown_url(url)!r}")
    parts = urlsplit(url)
    if api_key and (parts.username or parts.password) and btype not in (BackendType.ANTHROPIC, BackendType.AZURE,
                                                                       BackendType.GEMINI):
        # protocol/wires/upstream.py sends a user:password@ URL's credentials as Authorization: Basic, which
        # replaces the key's Authorization: Bearer (anthropic and azure send their key in another header).
        r.problems.error(child(r.path, "url"), f"carries credentials (user:password@) and {child(r.path, 'api_key')} "
                         "is set: every request would send the URL's credentials as 'Authorization: Basic' "
                         "instead of the key's 'Authorization: Bearer', so the key is never sent; keep one of them")
    if len(r.problems.errors) > errors_before:
        return None
    return BackendConfig(name=name, type=btype, url=url, api_key=api_key, models=models, weight=weight,
                         enabled=enabled, internal=internal, discovery=discovery, simulation=simulation,
                         retry_override=retry_override, replay=replay, stream_usage=stream_usage,
                         model_configs=model_configs,
                         model_metadata=model_metadata, model_aliases=model_aliases, upstream_ids=upstream_ids,
                         request_extensions=extensions, anthropic_version=version, anthropic_betas=betas,
                         region=region, aws_profile=aws_profile,
                         **declared)
