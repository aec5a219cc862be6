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
import datetime
import math
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

import attrs
import yaml
from attrs import frozen

from config import rules
from config.rules import Invalid, Problems, child

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
    """USD per 1M tokens, except ``cached_input_discount`` (a 0..1 fraction) and ``per_image`` (USD per image)."""

    input_tokens: float | None = None
    output_tokens: float | None = None
    cached_input_discount: float | None = None
    image_input_tokens: float | None = None
    cached_image_input_tokens: float | None = None
    # {size: price}, {tier: price} or {size: {quality: price}}
    per_image: Mapping[str, float | Mapping[str, float]] | None = None
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
    supports_assistant_prefill: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, nested; lists as lists (JSON/YAML-ready)."""
        return _plain(attrs.asdict(self, filter=lambda _a, v: v is not None))

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


# --- validation -----------------------------------------------------------------

def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(f"must be a number, got {rules.type_name(value)}")
    return float(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"must be an integer, got {rules.type_name(value)}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {rules.type_name(value)}")
    return value


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise Invalid("must be a list of non-empty strings")
    return tuple(value)


def _cutoff(value: Any) -> str:
    if isinstance(value, (datetime.date, datetime.datetime)):   # an unquoted 2023-12-01
        return value.isoformat()
    return rules.string()(value)


def _range(low: float, high: float | None = None) -> Callable[[float], str | None]:
    """A range check: the message for a value outside [low, high] (also NaN / infinity), else None."""
    def check(value: float) -> str | None:
        if not math.isfinite(value):
            return f"must be a finite number, got {value}"
        if value < low:
            return f"must be at least {_show(low)}, got {_show(value)}"
        if high is not None and value > high:
            return f"must be at most {_show(high)}, got {_show(value)}"
        return None
    return check


def _show(value: float) -> str:
    """10000001 and 1.5 as written, not 1e+07."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@frozen
class _Field:
    convert: Callable[[Any], Any]                    # raises Invalid: wrong type, value ignored
    bounds: Callable[[Any], str | None] | None = None  # a message: out of range, value kept


_PRICE = _Field(_number, _range(0))
_TOKENS = _Field(_integer, _range(0, MAX_TOKENS))
_FLAG = _Field(rules.boolean)
_LIST = _Field(_strings)

LONG_CONTEXT = {
    "threshold_tokens": _Field(_integer, _range(1, MAX_TOKENS)),
    "input_tokens": _PRICE,
    "output_tokens": _PRICE,
}
PRICING: dict[str, Any] = {
    "input_tokens": _PRICE,
    "output_tokens": _PRICE,
    "cached_input_discount": _Field(_number, _range(0, 1)),
    "image_input_tokens": _PRICE,
    "cached_image_input_tokens": _PRICE,
    "per_image": "per_image",
    "long_context": LONG_CONTEXT,
}
LIMITS: dict[str, Any] = {
    "context_window": _TOKENS,
    "max_output": _TOKENS,
    "max_prompt_length": _Field(_integer, _range(1, MAX_TOKENS)),
    "supported_sizes": _LIST,
    "max_n": _Field(_integer, _range(1, 10_000)),
    "supported_qualities": _LIST,
    "supported_output_formats": _LIST,
    "supported_styles": _LIST,
    "supports_streaming": _FLAG,
}
def _thinking_pattern(value: str) -> str | None:
    if value in THINKING_PATTERNS:
        return None
    return (f"unknown pattern {value!r} (known: {', '.join(THINKING_PATTERNS)}); "
            "streams of this model pass through unchanged")


THINKING: dict[str, Any] = {
    "pattern": _Field(rules.string(), _thinking_pattern),
    "end_marker": _Field(rules.string()),
    "assume_reasoning_first": _FLAG,
    "buffered": _FLAG,
    "max_buffer_size": _Field(_integer, _range(1, 1024**3)),
    "reasoning_timeout": _Field(rules.duration(maximum=3600)),
}
METADATA: dict[str, Any] = {
    "display_name": _Field(_text),
    "summary": _Field(_text),
    "capabilities": "capabilities",
    "knowledge_cutoff": _Field(_cutoff),
    "pricing": PRICING,
    "limits": LIMITS,
    "thinking": THINKING,
    "responses_only": _FLAG,
    "supports_assistant_prefill": _FLAG,
}


class _Check:
    """Reports for one model: structural problems (errors when ``strict``, else
    warnings and the value is ignored) and range problems (always warnings,
    the value is kept)."""

    def __init__(self, problems: Problems, model: str, strict: bool) -> None:
        self.problems = problems
        self.model = model
        self.strict = strict

    def structural(self, path: str, rule: str) -> None:
        if self.strict:
            self.problems.error(path, rule)
        else:
            self.problems.warn(path, f"{rule}; ignored")

    def out_of_range(self, path: str, field: str, rule: str) -> None:
        self.problems.warn(path, f"model {self.model!r} field {field}: {rule}; the value is kept")


def validate_metadata(raw: Any, path: str, model: str, problems: Problems, *, strict: bool = False) -> dict[str, Any]:
    """The cleaned mapping of one ``metadata`` block (only the fields that are set)."""
    return _section(raw, METADATA, path, "", _Check(problems, model, strict))


def _section(raw: Any, spec: Mapping[str, Any], path: str, field: str, check: _Check) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        check.structural(path, f"must be a mapping, got {rules.type_name(raw)}")
        return {}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        key_path, key_field = child(path, str(key)), child(field, str(key))
        kind = spec.get(key) if isinstance(key, str) else None
        if kind is None:
            check.structural(key_path, "unknown key")
            continue
        if value is None:
            continue
        if isinstance(kind, dict):
            out[key] = _section(value, kind, key_path, key_field, check)
        elif kind == "per_image":
            out[key] = _per_image(value, key_path, key_field, check)
        elif kind == "capabilities":
            caps = _capabilities(value, key_path, check)
            if caps is not None:
                out[key] = caps
        else:
            try:
                converted = kind.convert(value)
            except Invalid as exc:
                check.structural(key_path, str(exc))
                continue
            if kind.bounds is not None and (message := kind.bounds(converted)) is not None:
                check.out_of_range(key_path, key_field, message)
            out[key] = converted
    return out


def _capabilities(value: Any, path: str, check: _Check) -> tuple[str, ...] | None:
    try:
        names = _strings(value)
    except Invalid as exc:
        check.structural(path, str(exc))
        return None
    unknown = [n for n in names if n not in CAPABILITIES]
    if unknown:
        rule = f"unknown capability {unknown[0]!r}; known: {', '.join(CAPABILITIES)}"
        if check.strict:
            check.problems.error(path, rule)
            return None
        check.problems.warn(path, f"model {check.model!r}: {rule}; kept")   # a newer file may name newer ones
    return names


def _per_image(value: Any, path: str, field: str, check: _Check) -> dict[str, Any]:
    """{size: price}, {tier: price} or {size: {quality: price}}; each price USD per image, >= 0."""
    if not isinstance(value, Mapping):
        check.structural(path, f"must be a mapping of size or tier to price, got {rules.type_name(value)}")
        return {}
    price_range = _range(0)
    out: dict[str, Any] = {}

    def price(raw: Any, p: str, f: str) -> float | None:
        try:
            amount = _number(raw)
        except Invalid as exc:
            check.structural(p, str(exc))
            return None
        if (message := price_range(amount)) is not None:
            check.out_of_range(p, f, message)
        return amount

    for key, raw in value.items():
        p, f = child(path, str(key)), child(field, str(key))
        if isinstance(raw, Mapping):
            inner = {}
            for quality, amount in raw.items():
                got = price(amount, child(p, str(quality)), child(f, str(quality)))
                if got is not None:
                    inner[str(quality)] = got
            out[str(key)] = inner
        else:
            got = price(raw, p, f)
            if got is not None:
                out[str(key)] = got
    return out


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


# --- files -----------------------------------------------------------------------------

class MetadataFileError(Exception):
    """A metadata file that cannot be used at all: unreadable, not YAML, ``models`` not a list."""

    def __init__(self, path: str, rule: str) -> None:
        self.path = path
        self.rule = rule
        super().__init__(f"{path}: {rule}")


def read_file(path: Path, source: Source, problems: Problems) -> list[LayerEntry]:
    """The entries of one metadata file; problems inside it are warnings."""
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MetadataFileError(where, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise MetadataFileError(where, f"not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise MetadataFileError(where, f"must be a mapping with a models list, got {rules.type_name(raw)}")
    for key in raw:
        if key != "models":
            problems.warn(f"{where}: {key}", "unknown key; ignored")
    models = raw.get("models")
    if models is None:
        return []
    if not isinstance(models, list):
        raise MetadataFileError(where, f"models must be a list, got {rules.type_name(models)}")
    out: list[LayerEntry] = []
    for i, item in enumerate(models):
        path_i = f"{where}: models[{i}]"
        if not isinstance(item, Mapping):
            problems.warn(path_i, f"must be a mapping, got {rules.type_name(item)}; entry ignored")
            continue
        model = item.get("id")
        if not isinstance(model, str) or not model or "*" in model:
            problems.warn(child(path_i, "id"), "must be a model id (a non-empty string without '*'); "
                                               "entry ignored")
            continue
        for key in item:
            if key not in ("id", "aliases", "metadata"):
                problems.warn(child(path_i, str(key)), "unknown key; ignored")
        aliases: tuple[str, ...] = ()
        if item.get("aliases") is not None:
            try:
                aliases = tuple(a for a in _strings(item["aliases"]) if a != model)
            except Invalid as exc:
                problems.warn(child(path_i, "aliases"), f"{exc}; ignored")
        fields = validate_metadata(item.get("metadata"), child(path_i, "metadata"), model, problems)
        out.append(LayerEntry(model, aliases, fields, source))
    return out


def directory_files(directory: Path) -> list[Path]:
    """The metadata files of a drop-in directory, sorted by file name."""
    return sorted((p for p in directory.iterdir() if p.suffix in METADATA_SUFFIXES and p.is_file()),
                  key=lambda p: p.name)
