"""The whole configuration as one frozen Snapshot.

Everything downstream reads these classes; nothing reads YAML. Defaults live
here so the configuration reference and the code cannot disagree.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Mapping

import attrs
from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.access import Access
from switchyard.config.alerts import AlertsConfig
from switchyard.config.batches import BatchesConfig
from switchyard.config.cache_injection import CacheControlInjection
from switchyard.config.fields import field, restart_section, section
from switchyard.config.guardrails import Guardrail
from switchyard.config.kv_cache_index import KvCacheIndex
from switchyard.config.limits import Organization, RateLimiting, State
from switchyard.config.mcp_servers import McpServer, McpTools
from switchyard.config.metadata import (
    CatalogueEntry,
    ModelCatalogue,
    ModelMetadata,
    Source,
    with_backend_layer,
)
from switchyard.config.operations import Admin, Logging, Tracing
from switchyard.config.params import ParamPolicy, Preset
from switchyard.config.prompts import GlobalPrompts
from switchyard.config.resilience import CircuitBreaker, Fallback, RetryPolicy, Streaming, Timeouts
from switchyard.config.response_cache import ResponseCacheConfig
from switchyard.config.responses_tools import ResponsesTools
from switchyard.config.simulation import SimulatedEngine as SimulatedEngine  # re-exported: read from here
from switchyard.config.simulation import SimulatedFailure as SimulatedFailure
from switchyard.config.simulation import Simulation
from switchyard.config.smart_routing import SmartRouting
from switchyard.config.stored_responses import StoredResponses
from switchyard.config.telemetry import EngineStatsConfig, RoutingConfig
from switchyard.config.usage import UsageConfig
from switchyard.config.web_search import WebSearchConfig


class BackendType(str, Enum):
    """A backend's ``type``; what each one is and does is its kind (config/kinds/), never a switch on this."""

    OPENAI = "openai"
    VLLM = "vllm"
    SGLANG = "sglang"
    OLLAMA = "ollama"
    GENERIC = "generic"
    SIMULATED = "simulated"
    ANTHROPIC = "anthropic"       # the native Messages API (protocol/wires/anthropic.py)
    AZURE = "azure"               # Azure OpenAI's v1 API: OpenAI's wire, the key in an api-key header
    GEMINI = "gemini"             # the native Gemini API, generateContent (protocol/wires/gemini.py)
    BEDROCK = "bedrock"           # Amazon Bedrock's Converse API, SigV4-signed (protocol/wires/bedrock.py)


class Strategy(str, Enum):
    ROUND_ROBIN = "RoundRobin"
    WEIGHTED_ROUND_ROBIN = "WeightedRoundRobin"
    LEAST_LATENCY = "LeastLatency"
    RANDOM = "Random"
    CONSISTENT_HASH = "ConsistentHash"
    PREFIX_AWARE_HASH = "PrefixAwareHash"


@frozen
class ServerConfig:
    bind_address: str = field("0.0.0.0:8080", values.bind_address, restart=True)
    max_body_bytes: int = field(10 * 1024 * 1024, rules.size(minimum=1024, maximum=1024**3))
    # a file upload's whole form (/v1/images/edits and /variations): images are larger than JSON calls
    max_upload_bytes: int = field(50 * 1024 * 1024, rules.size(minimum=1024, maximum=1024**3))
    connection_pool_size: int = field(100, rules.integer(1, 100_000), restart=True)
    workers: int = field(1, rules.integer(1, 256), restart=True)
    max_concurrent_requests: int = field(0, rules.integer(0, 1_000_000))         # 0: no cap
    # gateways a request may have passed before this one (x-continuum-hops); past it: 508 Loop Detected
    max_hops: int = field(3, rules.integer(0, 100))
    # CIDRs whose X-Forwarded-For is believed
    trusted_proxies: tuple[str, ...] = field((), rules.list_of(values.cidr, "CIDR blocks"))
    shutdown_drain_timeout: float = field(30.0, rules.duration(maximum=3600, allow_zero=True), restart=True)
    # a realtime websocket with no message either way is closed
    realtime_idle_timeout: float = field(300.0, rules.duration(minimum=1, maximum=86_400))
    # a request body must arrive whole within this ...
    request_body_timeout: float = field(60.0, rules.duration(minimum=0.1, maximum=3600))
    # ... and never pause longer than this between chunks
    request_body_idle_timeout: float = field(15.0, rules.duration(minimum=0.1, maximum=3600))
    # idle connections, and the wait for a request's headers
    keep_alive_timeout: float = field(75.0, rules.duration(minimum=1, maximum=3600), restart=True)
    # h2c: HTTP/2 without TLS (upgrade or prior knowledge)
    http2_cleartext: bool = field(False, rules.boolean, restart=True)
    # a buffered backend answer past this is a 502
    max_upstream_response_bytes: int = field(64 * 1024 * 1024, rules.size(minimum=64 * 1024, maximum=16 * 1024**3))
    # where the gateway keeps its files (the SQLite ledger, its spill file); None: the user's data directory
    data_dir: str | None = field(None, rules.string(), restart=True)   # the ledger's files, opened at start

    def data_path(self) -> Path:
        """``data_dir``, else ``$XDG_DATA_HOME/switchyard``, else ``~/.local/share/switchyard``."""
        if self.data_dir is not None:
            return Path(self.data_dir).expanduser()
        base = os.environ.get("XDG_DATA_HOME") or ""
        return (Path(base) if os.path.isabs(base) else Path.home() / ".local" / "share") / "switchyard"


@frozen
class ModelConfig:
    """What is known of one model on one backend (``backends[].model_configs``).

    The routing view of the model metadata (``config/metadata.py``): the
    parts routing decisions read, derived from the backend's own
    ``model_configs`` entry. None means unknown, which never rules a route
    out; a context window of 0 means "not applicable" and rules nothing out.
    """

    capabilities: frozenset[str] | None = None
    context_window: int | None = None
    max_output: int | None = None
    supports_assistant_prefill: bool | None = None


@frozen
class BackendConfig:
    name: str
    type: BackendType
    url: str
    # Read one by one in config/load_backends.py: a backend's fields depend on its type. The fields only some
    # kinds take are each declared by the kinds that own them (config/kinds/: Kind.keys), which read them.
    api_key: str | None = field(None, rules.any_string, repr=False)   # "" means none (`${KEY:-}`)
    models: tuple[str, ...] = field((), rules.string_list(values.model_name))
    weight: int = field(1, rules.integer(1, 10_000))
    enabled: bool = field(True, rules.boolean)
    internal: bool = field(False, rules.boolean)
    discovery: bool = field(True, rules.boolean)
    simulation: Simulation | None = None
    retry_override: RetryPolicy | None = None
    replay: bool = field(True, values.replay)      # `replay: disabled` -> never send one request twice here
    # kinds spoken to in OpenAI's wire: ask a stream for its usage chunk (auto: until it refuses the option;
    # always; never)
    stream_usage: str = field("auto", values.words("auto", "always", "never"))
    model_configs: Mapping[str, ModelConfig] = attrs.field(factory=dict)       # routing view
    model_metadata: Mapping[str, ModelMetadata] = attrs.field(factory=dict)    # the full backend layer
    model_aliases: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)   # model_configs[].aliases
    upstream_ids: Mapping[str, str] = attrs.field(factory=dict)                # model_configs[].upstream_id
    request_extensions: "BodyExtensions" = attrs.field(factory=lambda: BodyExtensions())
    # the provider's tokens and requests per minute for this key (declared)
    provider_tpm: int | None = field(None, rules.integer(minimum=1))
    provider_rpm: int | None = field(None, rules.integer(minimum=1))
    # where the engine's Prometheus page is, if not url + engine_stats.path
    engine_stats_url: str | None = field(None, values.metrics_url)
    # type anthropic: the anthropic-version header it is sent
    anthropic_version: str = field("2023-06-01", values.anthropic_version)
    # type anthropic: the anthropic-beta names a client may turn on (None: all it sends; (): none)
    anthropic_betas: tuple[str, ...] | None = None
    # type bedrock: its AWS region (the runtime's url and the signature's scope) and the profile of the
    # shared config/credentials files its credentials come from (None: the environment's, then the default)
    region: str | None = field(None, rules.string(r"[a-z]{2}(-[a-z]+)+-\d{1,2}", "an AWS region such as us-east-1"))
    aws_profile: str | None = field(None, rules.string(r"[A-Za-z0-9_.+=,@-]{1,128}", "a profile name"))

    @property
    def exact_models(self) -> tuple[str, ...]:
        return tuple(m for m in self.models if not is_glob(m))

    @property
    def model_globs(self) -> tuple[str, ...]:
        return tuple(m for m in self.models if is_glob(m))


@frozen
class BodyExtensions:
    """``backends[].request_extensions.body``: merged leaf by leaf into every body sent to this backend.

    ``defaults`` fill keys the body lacks; ``overrides`` replace whatever is there.
    """

    defaults: Mapping[str, object] = attrs.field(factory=dict)
    overrides: Mapping[str, object] = attrs.field(factory=dict)

    @property
    def empty(self) -> bool:
        return not self.defaults and not self.overrides


def is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


@frozen
class HealthChecks:
    enabled: bool = field(True, rules.boolean)
    interval: float = field(30.0, rules.duration(minimum=0.1, maximum=86_400))
    timeout: float = field(5.0, rules.duration(minimum=0.01, maximum=300))
    unhealthy_threshold: int = field(3, rules.integer(1, 100))
    healthy_threshold: int = field(2, rules.integer(1, 100))
    warmup_check_interval: float = field(1.0, rules.duration(minimum=0.1, maximum=3600))
    path: str | None = field(None, values.http_path)     # None: the kind's own (config/kinds: health_path)


@frozen
class ConsistentHashConfig:
    key_header: str = field("x-session-id", values.header_token)
    virtual_nodes: int = field(160, rules.integer(1, 10_000))


@frozen
class PrefixRouting:
    enabled: bool = field(True, rules.boolean)
    max_prefix_length: int = field(256, rules.integer(1, 1_000_000))
    load_factor_epsilon: float = field(0.25, rules.number(0.0, 100.0))
    virtual_nodes: int = field(160, rules.integer(1, 10_000))
    # prompt-caching breakpoints added to anthropic and bedrock calls (config/cache_injection.py); read by hand
    anthropic_cache_control_injection: CacheControlInjection = attrs.field(factory=CacheControlInjection)


@frozen
class Discovery:
    interval: float = field(300.0, rules.duration(minimum=1))


@frozen
class VariantSuffixes:
    # read `name:nitro|floor|thinking|online` on /v1/chat/completions
    enabled: bool = field(False, rules.boolean)


@frozen
class Proxy:
    """Request-shaping features of the proxy itself (``proxy:``)."""

    variant_suffixes: VariantSuffixes = section(VariantSuffixes)
    client_provider_preferences: bool = field(False, rules.boolean)   # interpret the client's `provider` object


@frozen
class Dedup:
    """``dedup``: identical calls in flight together share one upstream call."""

    enabled: bool = field(False, rules.boolean)
    # in-flight keys tracked at once; beyond it calls run on their own
    max_entries: int = field(10_000, rules.integer(1, 1_000_000))


@frozen
class Snapshot:
    """One validated revision of the configuration; never mutated.

    Read section by section by ``load.build_snapshot``: the sections are
    checked against each other once all are read.
    """

    server: ServerConfig = ServerConfig()
    backends: tuple[BackendConfig, ...] = ()
    selection_strategy: Strategy = field(Strategy.ROUND_ROBIN, rules.one_of({s.value: s for s in Strategy}))
    health_checks: HealthChecks = HealthChecks()
    consistent_hash: ConsistentHashConfig = ConsistentHashConfig()
    prefix_routing: PrefixRouting = PrefixRouting()
    timeouts: Timeouts = Timeouts()
    discovery: Discovery = Discovery()
    retry: RetryPolicy = RetryPolicy()
    fallback: Fallback = Fallback()
    circuit_breaker: CircuitBreaker = CircuitBreaker()   # per-(backend, model) circuits of real calls
    streaming: Streaming = Streaming()
    tracing: Tracing = restart_section(Tracing())     # the exporter and its thread, set up at start
    logging: Logging = restart_section(Logging())     # the handlers, set up at start
    admin: Admin = Admin()
    proxy: Proxy = Proxy()
    api_keys: Access = Access()
    request_params: ParamPolicy = ParamPolicy()
    request_presets: Mapping[str, Preset] = attrs.field(factory=dict)
    global_prompts: GlobalPrompts = GlobalPrompts()
    dedup: Dedup = Dedup()
    engine_stats: EngineStatsConfig = EngineStatsConfig()
    routing: RoutingConfig = RoutingConfig()
    kv_cache_index: KvCacheIndex = KvCacheIndex()   # what each engine's KV cache holds (config/kv_cache_index.py)
    smart_routing: SmartRouting = SmartRouting()
    responses_tools: ResponsesTools = ResponsesTools()   # POST /v1/responses hosted tools and resource ids
    stored_responses: StoredResponses = StoredResponses()   # which backend holds which stored response
    model_metadata_file: str | None = field(None, rules.string())
    model_metadata_dirs: tuple[str, ...] = field((), rules.string_list(rules.string()))
    models: ModelCatalogue = ModelCatalogue()     # the metadata file layers, merged
    usage: UsageConfig = restart_section(UsageConfig())   # the usage ledger: its store, opened at start
    rate_limiting: RateLimiting = RateLimiting()   # client limits by scope
    organizations: Mapping[str, Organization] = attrs.field(factory=dict)   # by id, in file order
    state: State = restart_section(State())   # where the limiters' counters live: its Redis, dialled at start
    response_cache: ResponseCacheConfig = ResponseCacheConfig()   # answers kept and served again
    guardrails: tuple[Guardrail, ...] = ()         # checks on what calls send and get back, in order
    alerts: AlertsConfig = AlertsConfig()          # budget and key events POSTed to webhooks
    batches: BatchesConfig = BatchesConfig()       # /v1/files and /v1/batches (config/batches.py)
    # the :online variant's search providers (None: :online is refused); loaded by hand (config/web_search.py)
    web_search: WebSearchConfig | None = section(WebSearchConfig, optional=True)
    mcp_servers: tuple[McpServer, ...] = ()        # the tool servers /mcp aggregates (docs/mcp.md)
    mcp_tools: McpTools = McpTools()               # the tool loop of calls naming MCP servers in their tools
    revision: str = ""
    source: str = "<defaults>"
    # A backend's model_configs layer merged over the catalogue's entry, by (model, backend): a snapshot
    # never changes, and merging per priced call (asdict, deepcopy, from_dict) cost about 200k instructions.
    # Bounded by the configuration: only ids a backend's model_configs names are kept.
    _layered: dict[tuple[str, str], CatalogueEntry | None] = attrs.field(
        factory=dict, init=False, repr=False, eq=False, hash=False, metadata={"internal": True})
    # Whether a stream's thinking may be split with a decision timer, a task of the call's own: any
    # thinking metadata at all, in the catalogue or a backend's model_configs. Without any, a stream
    # call needs no nursery of its own (about 78k instructions a stream less).
    may_think: bool = attrs.field(
        default=attrs.Factory(lambda self: _any_thinking(self.models, self.backends), takes_self=True),
        init=False, repr=False, eq=False, hash=False, metadata={"internal": True})

    @property
    def limits_enabled(self) -> bool:
        """Whether any rate limit or budget applies: the limiter has something to count."""
        return (self.rate_limiting.enabled or self.api_keys.limited
                or any(o.rate_limit is not None or o.budget is not None for o in self.organizations.values()))

    def backend(self, name: str) -> BackendConfig | None:
        for b in self.backends:
            if b.name == name:
                return b
        return None

    def metadata_for(self, model: str, backend: str | None = None) -> ModelMetadata | None:
        """What is known of ``model`` as served by ``backend``: the metadata files under that
        backend's model_configs, by exact id or else an exact alias. None: nothing is known."""
        entry = self.model_entry(model, backend)
        if entry is None and model in self.models.aliases:
            entry = self.model_entry(self.models.aliases[model], backend)
        return entry.metadata if entry is not None else None

    def model_entry(self, model: str, backend: str | None = None) -> CatalogueEntry | None:
        """The metadata of catalogue id ``model``: the file layers, and with ``backend`` that
        backend's ``model_configs`` entry on top (the highest layer, for that backend only)."""
        entry = self.models.get(model)
        b = self.backend(backend) if backend is not None else None
        if b is None or model not in b.model_metadata:
            return entry
        key = (model, b.name)
        if key not in self._layered:
            index = self.backends.index(b)
            source = Source(f"backends[{index}].model_configs", f"{self.source} (backend {b.name})")
            self._layered[key] = with_backend_layer(entry, model, b.model_metadata[model], source)
        return self._layered[key]


def _any_thinking(models: ModelCatalogue, backends: tuple[BackendConfig, ...]) -> bool:
    return (any(entry.metadata.thinking is not None for entry in models.entries.values())
            or any(meta.thinking is not None for b in backends for meta in b.model_metadata.values()))
