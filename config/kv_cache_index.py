"""``kv_cache_index``: the index of what each engine's KV cache holds, and the scorer that reads it.

The index keys blocks of ``block_size`` tokens by the gateway's own chain
hash over token ids (``actors/routing/kv_blocks.py``); ``max_entries`` bounds
each backend's entries, ``entry_ttl_seconds`` ages the gateway's own record
of a backend without an event source. ``scoring`` trades the overlap
against load; ``storage_offloading`` weighs blocks held only in a lower tier
(CPU, disk) of an engine with an offload connector. ``tokenizers`` names the
operator's tokenizer files per model glob (never downloaded); ``event_sources``
where each backend's engine publishes its KV events (vLLM's ZMQ publisher,
or an SSE stream of the same batches).

The file paths are resolved against the config file's directory and must
exist when the configuration loads; what reads them is not here.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

import attrs
from attrs import Factory, frozen

from switchyard.config import rules
from switchyard.config.fields import field, load_section, restart_section, section
from switchyard.config.rules import Invalid, Problems, Reader, child

TRANSPORTS = ("zmq", "sse")
ZMQ_SCHEMES = ("tcp", "ipc")
SSE_SCHEMES = ("http", "https")
TIER = r"[A-Za-z][A-Za-z0-9_\-]{0,31}"
DEFAULT_TIER_WEIGHTS = {"CPU": 0.5, "DISK": 0.25}


def tier_weights(value: Any) -> Mapping[str, float]:
    """Tier name (as the engine's events spell ``medium``) -> the fraction of a block it is worth."""
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping of tier names to fractions, got {rules.type_name(value)}")
    out: dict[str, float] = {}
    name_rule, weight_rule = rules.string(TIER, "a tier name like CPU"), rules.number(0.0, 1.0)
    for name, weight in value.items():
        try:
            name_rule(name)
        except Invalid as exc:
            raise Invalid(f"key {name!r}: {exc}") from None
        if name == "GPU":
            raise Invalid("GPU: a block on the GPU always counts 1; name the lower tiers only")
        try:
            out[name] = weight_rule(weight)
        except Invalid as exc:
            raise Invalid(f"{name}: {exc}") from None
    return out


@frozen
class Scoring:
    overlap_weight: float = field(1.0, rules.number(0.0, 1.0))   # the held fraction of the prompt's blocks
    load_weight: float = field(0.5, rules.number(0.0, 1.0))      # in-flight calls over the busiest candidate's
    min_overlap: float = field(0.1, rules.number(0.0, 1.0))      # below it the index decides nothing


@frozen
class StorageOffloading:
    enabled: bool = field(False, rules.boolean)
    tier_weights: Mapping[str, float] = field(Factory(lambda: dict(DEFAULT_TIER_WEIGHTS)), tier_weights)


@frozen
class TokenizerFiles:
    """``kv_cache_index.tokenizers.<model glob>``: the model's tokenizer and chat template files,
    as resolved paths (the config file's directory for relative ones)."""

    pattern: str
    tokenizer: str                 # tokenizer.json (HF tokenizers)
    chat_template: str | None      # a .jinja file or tokenizer_config.json; None: chat calls are not tokenized


@frozen
class EventSource:
    """``kv_cache_index.event_sources.<backend>``: where that backend's engine publishes its KV events."""

    endpoint: str = field("", rules.string())
    transport: str = field("", rules.one_of({t: t for t in TRANSPORTS}))   # "": by the endpoint's scheme
    replay_endpoint: str | None = field(None, rules.string())              # zmq: the publisher's ROUTER
    topic: str = field("", rules.any_string)                               # zmq: the subscription prefix
    reconnect_interval_ms: int = field(1000, rules.integer(10, 600_000))


@frozen
class KvCacheIndex:
    enabled: bool = field(False, rules.boolean)
    block_size: int = field(16, rules.integer(1, 4096))             # vLLM's default --block-size
    max_entries: int = field(100_000, rules.integer(1, 10_000_000))  # per backend
    entry_ttl_seconds: float = field(600.0, rules.number(1.0, 604_800.0))
    scoring: Scoring = section(Scoring)
    storage_offloading: StorageOffloading = section(StorageOffloading)
    tokenizers: Mapping[str, TokenizerFiles] = attrs.field(factory=dict)     # model glob -> files, in file order
    # backend -> its source, whose connection is opened at start: a change waits for a restart
    event_sources: Mapping[str, EventSource] = restart_section(Factory(dict))

    def tokenizer_files(self, model: str) -> TokenizerFiles | None:
        """The files configured for ``model``: its exact key, else the first glob (file order) it matches."""
        found = self.tokenizers.get(model)
        if found is not None:
            return found
        return next((t for t in self.tokenizers.values() if fnmatchcase(model, t.pattern)), None)

    @property
    def weights(self) -> Mapping[str, float]:
        """The lower tiers' weights the index counts (none unless storage_offloading is enabled)."""
        return self.storage_offloading.tier_weights if self.storage_offloading.enabled else {}


# --- loading ---------------------------------------------------------------------

def kv_cache_index(r: Reader, base_dir: Path, backends: Sequence[str]) -> KvCacheIndex:
    """The section, with ``tokenizers`` and ``event_sources`` read by hand (mappings keyed by model glob and
    backend name); ``backends`` are the declared backends' names."""
    tokenizers = _tokenizers(r.section("tokenizers"), base_dir)
    sources = _event_sources(r.section("event_sources"), set(backends))
    return load_section(KvCacheIndex, r, tokenizers=tokenizers, event_sources=sources)


def _tokenizers(r: Reader, base_dir: Path) -> dict[str, TokenizerFiles]:
    out: dict[str, TokenizerFiles] = {}
    for pattern, raw in r.raw.items():
        item = Reader(raw, child(r.path, str(pattern)), r.problems)
        if not isinstance(pattern, str) or not pattern:
            r.problems.error(item.path, "must be a model name or glob")
            continue
        tokenizer = _file(item, "tokenizer", base_dir, required=True)
        template = _file(item, "chat_template", base_dir, required=False)
        item.finish()
        if tokenizer is not None:
            out[pattern] = TokenizerFiles(pattern, tokenizer, template)
    return out


def _file(r: Reader, key: str, base_dir: Path, *, required: bool) -> str | None:
    name = r.get(key, rules.string(), None)
    if name is None:
        if required and not r.has(key):
            r.problems.error(child(r.path, key), "is required (a path to the model's tokenizer.json)")
        return None
    path = base_dir / Path(name).expanduser()
    if not path.is_file():
        r.problems.error(child(r.path, key), f"no such file: {path}")
        return None
    return str(path.absolute())


def _event_sources(r: Reader, backends: set[str]) -> dict[str, EventSource]:
    out: dict[str, EventSource] = {}
    for name, raw in r.raw.items():
        item = Reader(raw, child(r.path, str(name)), r.problems)
        errors = len(r.problems.errors)
        source = load_section(EventSource, item, _check_source)
        if name not in backends:
            r.problems.error(item.path, f"no backend is named {name!r}: an event source belongs to a declared "
                                        "backend")
        if len(r.problems.errors) == errors:
            out[str(name)] = attrs.evolve(source, transport=transport_of(source))
    return out


def transport_of(source: EventSource) -> str:
    """The source's transport: as written, else ``sse`` for an http(s):// endpoint and ``zmq`` otherwise."""
    return source.transport or ("sse" if urlsplit(source.endpoint).scheme in SSE_SCHEMES else "zmq")


def _check_source(source: EventSource, r: Reader) -> None:
    if not source.endpoint:
        if not r.has("endpoint"):
            r.problems.error(child(r.path, "endpoint"), "is required (tcp://host:port for vLLM's ZMQ publisher, "
                                                        "http(s):// for an SSE stream)")
        return
    scheme, transport = urlsplit(source.endpoint).scheme, transport_of(source)
    schemes = SSE_SCHEMES if transport == "sse" else ZMQ_SCHEMES
    if scheme not in schemes:
        r.problems.error(child(r.path, "endpoint"),
                         f"transport {transport} needs a {' or '.join(s + '://' for s in schemes)} URL, "
                         f"got {source.endpoint!r}")
    elif problem := _address_problem(source.endpoint):
        r.problems.error(child(r.path, "endpoint"), f"{problem}, got {source.endpoint!r}")
    if source.replay_endpoint is not None and (transport != "zmq"
                                               or urlsplit(source.replay_endpoint).scheme not in ZMQ_SCHEMES):
        r.problems.error(child(r.path, "replay_endpoint"),
                         "is a zmq source's tcp:// or ipc:// replay address (vLLM's replay_endpoint)")
    elif source.replay_endpoint is not None and (problem := _address_problem(source.replay_endpoint)):
        r.problems.error(child(r.path, "replay_endpoint"), f"{problem}, got {source.replay_endpoint!r}")
    if source.topic and transport != "zmq":
        r.problems.error(child(r.path, "topic"), "is for zmq sources only")


def _address_problem(url: str) -> str | None:
    """What a reader could not connect to: a tcp:// address without a host and port (vLLM's own ``*``, a
    bind address, is not one), an ipc:// one without a path, an http(s):// one without a host."""
    parts = urlsplit(url)
    if parts.scheme == "ipc":
        return None if url[len("ipc://"):] else "an ipc:// address needs a path"
    try:
        port, valid = parts.port, True
    except ValueError:   # not a number, or past 65535
        port, valid = None, False
    if parts.scheme == "tcp" and (not parts.hostname or parts.hostname == "*" or port is None):
        return "a tcp:// address needs the engine's host and port (tcp://host:5557; not vLLM's bind address *)"
    if parts.scheme in SSE_SCHEMES and (not parts.hostname or not valid):
        return "an http(s):// URL needs a host (and a port from 0 to 65535 if it gives one)"
    return None


def check(index: KvCacheIndex, prefix_routing_enabled: bool, problems: Problems) -> None:
    """The warnings that need other sections."""
    if index.enabled and not prefix_routing_enabled:
        problems.warn("kv_cache_index.enabled",
                      "true while prefix_routing.enabled is false: the KV-overlap scorer needs both and stays off")
    if not index.enabled and index.event_sources:
        problems.warn("kv_cache_index.event_sources",
                      "set while kv_cache_index.enabled is false: no pick reads the index")
