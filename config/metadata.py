"""Model metadata: what is known of a model, assembled from layered sources.

A metadata entry describes one model id (display name, capabilities,
pricing, limits, thinking pattern, ...). Entries come from four layers,
lowest to highest (the order is our choice; the spec only names the sources):

1. ``model_metadata_file``       one YAML file, relative to the config file's directory
2. ``model-metadata.d/``         every *.yaml / *.yml next to the config file, by file name
3. ``model_metadata_dirs``       each listed directory in turn, same rule
4. ``backends[].model_configs``  per backend, only for that backend

Per model id, nested mappings merge key by key; a later layer's scalar or
list replaces the earlier one. ``provenance`` records, for every field
(dotted leaf path such as ``pricing.input_tokens``), which layer and file set
it.

Problems inside a metadata file are warnings, never load errors: a value out
of its range is reported with the model and field and kept; an unknown key
or a value of the wrong type is reported with its dotted path and ignored.
A file that cannot be read or parsed, or whose ``models`` is not a list, is
a configuration error naming the file (``MetadataFileError``). In
``config.yaml`` (``model_configs``) the config file's usual strictness holds:
unknown keys and wrong types are errors; range violations still only warn.

This module does no routing; ``config/load.py`` wires the layers into the
Snapshot and derives the routing view (``schema.ModelConfig``).
"""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import attrs
from attrs import frozen

from switchyard.config.rules import Problems, child

MAX_TOKENS = 10_000_000
CAPABILITIES = ("chat", "text", "vision", "code", "reasoning", "tool", "tools", "function_calling", "embedding",
                "image_generation", "audio", "decisions")
THINKING_PATTERNS = ("unterminated_start",)   # what the stream relay rewrites; others pass unchanged
DROP_IN_DIR = "model-metadata.d"
METADATA_SUFFIXES = (".yaml", ".yml")


# --- the metadata itself ------------------------------------------------------

@frozen
class LongContext:
    threshold_tokens: int | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None


@frozen
class Pricing:
    """USD per 1M tokens (``input_characters``: per 1M characters), except ``cached_input_discount`` and
    ``batch_discount`` (0..1 fractions), ``per_image`` (USD per image), ``per_search_unit`` (USD per rerank
    search unit) and ``per_audio_minute`` (USD per minute of audio)."""

    input_tokens: float | None = None
    output_tokens: float | None = None
    cached_input_discount: float | None = None
    # The share taken off a batch line's whole cost (ledger purpose ``batch``): OpenAI's Batch API is half price.
    batch_discount: float | None = None
    # Explicit prompt-cache rates (Anthropic's and Bedrock's price sheets): reads, in place of the discount;
    # writes (Anthropic's 5-minute cache), in place of input_tokens. Absent: the discount, the input rate.
    cache_read_input_tokens: float | None = None
    cache_write_input_tokens: float | None = None
    image_input_tokens: float | None = None
    cached_image_input_tokens: float | None = None
    # {size: price}, {tier: price} or {size: {quality: price}}
    per_image: Mapping[str, float | Mapping[str, float]] | None = None
    # USD per rerank search unit (Cohere's billing: one query over up to 100 documents); a rerank model billed
    # per token takes input_tokens instead
    per_search_unit: float | None = None
    # The audio API: audio tokens of the input (gpt-4o-transcribe's), in place of the text rate; a
    # transcription's or translation's minutes of audio (whisper-1's); speech's characters of input (tts-1's).
    audio_input_tokens: float | None = None
    per_audio_minute: float | None = None
    input_characters: float | None = None
    long_context: LongContext | None = None


@frozen
class Limits:
    """Token limits (0 = not applicable) and the informational image-request limits."""

    context_window: int | None = None
    max_output: int | None = None
    max_prompt_length: int | None = None      # characters, not tokens
    supported_sizes: tuple[str, ...] | None = None
    max_n: int | None = None
    supported_qualities: tuple[str, ...] | None = None
    supported_output_formats: tuple[str, ...] | None = None
    supported_styles: tuple[str, ...] | None = None
    supports_streaming: bool | None = None


@frozen
class Thinking:
    pattern: str | None = None                 # e.g. unterminated_start
    end_marker: str | None = None              # e.g. </think>
    assume_reasoning_first: bool | None = None
    buffered: bool | None = None
    max_buffer_size: int | None = None         # bytes
    reasoning_timeout: float | None = None     # seconds


@frozen
class ModelMetadata:
    """One model's metadata; None everywhere means unknown (never "no")."""

    display_name: str | None = None
    summary: str | None = None
    capabilities: tuple[str, ...] | None = None
    knowledge_cutoff: str | None = None
    pricing: Pricing | None = None
    limits: Limits | None = None
    thinking: Thinking | None = None
    responses_only: bool | None = None
    # Served on /v1/chat/completions except with function tools and a reasoning effort other than
    # none: only those requests take the Responses API bridge (protocol/wires/responses.py).
    chat_completions_tools_require_none_reasoning: bool | None = None
    supports_assistant_prefill: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, nested; lists as lists (JSON/YAML-ready)."""
        return {k: _plain(v) for k, v in attrs.asdict(self, filter=lambda _a, v: v is not None).items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelMetadata:
        """From a validated (cleaned) mapping, as ``validate_metadata`` returns it."""
        def section(kind: type, raw: Mapping[str, Any] | None) -> Any:
            return None if raw is None else kind(**raw)

        pricing = d.get("pricing")
        if pricing is not None:
            pricing = dict(pricing)
            if pricing.get("per_image") is not None:
                pricing["per_image"] = _freeze(pricing["per_image"])
            pricing["long_context"] = section(LongContext, pricing.get("long_context"))
        return cls(
            display_name=d.get("display_name"), summary=d.get("summary"),
            capabilities=d.get("capabilities"), knowledge_cutoff=d.get("knowledge_cutoff"),
            pricing=section(Pricing, pricing), limits=section(Limits, d.get("limits")),
            thinking=section(Thinking, d.get("thinking")),
            responses_only=d.get("responses_only"), supports_assistant_prefill=d.get("supports_assistant_prefill"),
            chat_completions_tools_require_none_reasoning=d.get("chat_completions_tools_require_none_reasoning"),
        )


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    return value


# --- where a field came from ----------------------------------------------------

@frozen
class Source:
    """One layer: which kind (``model_metadata_file``, ``model-metadata.d``,
    ``model_metadata_dirs[i]``, ``backends[i].model_configs``) and which file."""

    layer: str
    file: str

    def __str__(self) -> str:
        return f"{self.layer} ({self.file})"


@frozen
class CatalogueEntry:
    id: str
    aliases: tuple[str, ...]
    metadata: ModelMetadata
    provenance: Mapping[str, Source]     # dotted leaf field path -> the layer that set it

    def sources(self, field: str) -> tuple[Source, ...]:
        """The layers that set ``field`` or anything beneath it, lowest first, each once."""
        out: list[Source] = []
        for path, source in self.provenance.items():
            if (path == field or path.startswith(field + ".")) and source not in out:
                out.append(source)
        return tuple(out)


@frozen
class ModelCatalogue:
    """The file layers merged: id -> entry, alias -> id, and the paths they were read from."""

    entries: Mapping[str, CatalogueEntry] = attrs.field(factory=lambda: MappingProxyType({}))
    aliases: Mapping[str, str] = attrs.field(factory=lambda: MappingProxyType({}))
    files: tuple[str, ...] = ()        # metadata files read, lowest layer first
    watch: tuple[str, ...] = ()        # files and directories whose change means "reload"

    def get(self, model_id: str) -> CatalogueEntry | None:
        return self.entries.get(model_id)


# --- merging ------------------------------------------------------------------------

def merge(base: dict[str, Any], over: Mapping[str, Any], provenance: dict[str, Source], source: Source,
          prefix: str = "") -> None:
    """Merge ``over`` into ``base`` in place: mappings key by key, anything else replaced."""
    for key, value in over.items():
        path = child(prefix, key)
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge(base[key], value, provenance, source, path)
            continue
        for gone in [p for p in provenance if p == path or p.startswith(path + ".")]:
            del provenance[gone]
        base[key] = copy.deepcopy(dict(value)) if isinstance(value, Mapping) else value
        for leaf in _leaves(value, path):
            provenance[leaf] = source


def _leaves(value: Any, path: str) -> Iterable[str]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _leaves(inner, child(path, key))
    else:
        yield path


@frozen
class LayerEntry:
    """One model entry as one layer states it (already validated)."""

    id: str
    aliases: tuple[str, ...]
    fields: Mapping[str, Any]
    source: Source


def assemble(layers: Iterable[LayerEntry], problems: Problems, *, files: tuple[str, ...] = (),
             watch: tuple[str, ...] = ()) -> ModelCatalogue:
    """Merge the entries in order (lowest layer first) into a catalogue."""
    merged: dict[str, dict[str, Any]] = {}
    provenance: dict[str, dict[str, Source]] = {}
    aliases: dict[str, list[str]] = {}
    owner: dict[str, tuple[str, Source]] = {}
    for entry in layers:
        fields = merged.setdefault(entry.id, {})
        merge(fields, entry.fields, provenance.setdefault(entry.id, {}), entry.source)
        names = aliases.setdefault(entry.id, [])
        for alias in entry.aliases:
            if alias in owner and owner[alias][0] != entry.id:
                previous, where = owner[alias]
                problems.warn(str(entry.source), f"alias {alias!r} of {entry.id!r} was an alias of {previous!r} "
                                                 f"({where}); now {entry.id!r}'s")
                aliases[previous].remove(alias)
            owner[alias] = (entry.id, entry.source)
            if alias not in names:
                names.append(alias)
    for alias, (model, source) in list(owner.items()):
        if alias in merged:
            problems.warn(str(source), f"alias {alias!r} of {model!r} is itself a model id; the id wins")
    entries = {
        model: CatalogueEntry(model, tuple(aliases[model]), ModelMetadata.from_dict(fields),
                              MappingProxyType(dict(provenance[model])))
        for model, fields in merged.items()
    }
    return ModelCatalogue(MappingProxyType(entries),
                          MappingProxyType({a: m for a, (m, _) in owner.items() if a not in merged}),
                          files=files, watch=watch)


def with_backend_layer(entry: CatalogueEntry | None, model: str, overrides: ModelMetadata,
                       source: Source) -> CatalogueEntry:
    """``entry`` (the file layers, or nothing) with one backend's ``model_configs`` on top."""
    fields = entry.metadata.to_dict() if entry is not None else {}
    provenance = dict(entry.provenance) if entry is not None else {}
    merge(fields, overrides.to_dict(), provenance, source)
    return CatalogueEntry(entry.id if entry is not None else model, entry.aliases if entry is not None else (),
                          ModelMetadata.from_dict(_tuples(fields)), MappingProxyType(provenance))


def _tuples(value: Any) -> Any:
    """Lists back to tuples (``to_dict`` gives lists; the attrs classes hold tuples)."""
    if isinstance(value, Mapping):
        return {k: _tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(value)
    return value
