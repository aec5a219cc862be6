"""Checking and reading model metadata: field rules, metadata files, drop-in directories.

The loading half of ``config/metadata.py`` (which holds the shapes, the
catalogue and the merge). In metadata files every problem is a warning
naming its dotted path (the spec's runtime-load rule); ``strict`` (for
``backends[].model_configs`` in the config file itself) makes unknown keys
and wrong types errors like everywhere else in that file.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import attrs
import yaml
from attrs import frozen

from switchyard.config import rules
from switchyard.config.metadata import (
    CAPABILITIES,
    DROP_IN_DIR,
    MAX_TOKENS,
    METADATA_SUFFIXES,
    THINKING_PATTERNS,
    LayerEntry,
    ModelCatalogue,
    ModelMetadata,
    Source,
    assemble,
)
from switchyard.config.rules import Invalid, Problems, Reader, child
from switchyard.config.schema import ModelConfig

# --- validation -----------------------------------------------------------------

def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(f"must be a number, got {rules.type_name(value)}")
    return float(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"must be an integer, got {rules.type_name(value)}")
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
    "batch_discount": _Field(_number, _range(0, 1)),
    "cache_read_input_tokens": _PRICE,
    "cache_write_input_tokens": _PRICE,
    "image_input_tokens": _PRICE,
    "cached_image_input_tokens": _PRICE,
    "per_image": "per_image",
    "per_search_unit": _PRICE,
    "audio_input_tokens": _PRICE,
    "per_audio_minute": _PRICE,
    "input_characters": _PRICE,
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
    "display_name": _Field(rules.any_string),
    "summary": _Field(rules.any_string),
    "capabilities": "capabilities",
    "knowledge_cutoff": _Field(_cutoff),
    "pricing": PRICING,
    "limits": LIMITS,
    "thinking": THINKING,
    "responses_only": _FLAG,
    "chat_completions_tools_require_none_reasoning": _FLAG,
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
    out = _section(raw, METADATA, path, "", _Check(problems, model, strict))
    if out.get("responses_only") is True and out.get("chat_completions_tools_require_none_reasoning") is True:
        # Not an error: the broader flag wins. But the narrower one was meant to spare plain calls the bridge.
        problems.warn(child(path, "responses_only"), f"model {model!r}: responses_only: true sends every chat "
                      "request through the Responses API bridge, so chat_completions_tools_require_none_reasoning "
                      "has no effect; set only the narrower flag if the model serves Chat Completions")
    return out


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
    return entries_of(raw, where, source, problems)


def entries_of(raw: Any, where: str, source: Source, problems: Problems,
               top_keys: tuple[str, ...] = ("models",)) -> list[LayerEntry]:
    """The entries of one metadata document (``raw``, parsed YAML) read from ``where``."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise MetadataFileError(where, f"must be a mapping with a models list, got {rules.type_name(raw)}")
    for key in raw:
        if key not in top_keys:
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


# --- assembling the layers and the backend entries --------------------------------

def routing_view(meta: ModelMetadata) -> ModelConfig:
    """The part of a model's metadata that routing decisions read."""
    limits = meta.limits
    return ModelConfig(
        capabilities=frozenset(meta.capabilities) if meta.capabilities is not None else None,
        context_window=limits.context_window if limits is not None else None,
        max_output=limits.max_output if limits is not None else None,
        supports_assistant_prefill=meta.supports_assistant_prefill,
    )


def model_catalogue(metadata_file: str | None, metadata_dirs: tuple[str, ...], base_dir: Path,
                     problems: Problems, builtin: Iterable[LayerEntry] = (),
                     reserved: frozenset[str] = frozenset()) -> ModelCatalogue:
    """The layers, lowest first: ``builtin`` (``config/builtin_metadata.py``; but no entry whose id a
    file or ``reserved``, the backends' model_configs aliases, names as an alias: the operator's alias
    wins), then the files: model_metadata_file, model-metadata.d/, model_metadata_dirs."""
    layers: list[tuple[str, Path, str]] = []        # (layer name, file, config path for errors)
    watch: list[str] = []
    if metadata_file is not None:
        path = base_dir / metadata_file
        watch.append(str(path))
        if not path.is_file():
            problems.error("model_metadata_file", f"no such file: {path}")
        else:
            layers.append(("model_metadata_file", path, "model_metadata_file"))
    drop_in = base_dir / DROP_IN_DIR
    watch.append(str(drop_in))   # watched even while absent: creating it is a change
    directories = [(DROP_IN_DIR, drop_in, DROP_IN_DIR)] if drop_in.is_dir() else []
    for i, name in enumerate(metadata_dirs):
        path = base_dir / name
        watch.append(str(path))
        if not path.is_dir():
            problems.error(child("model_metadata_dirs", i), f"no such directory: {path}")
        else:
            directories.append((f"model_metadata_dirs[{i}]", path, child("model_metadata_dirs", i)))
    for layer, directory, where in directories:
        try:
            files = directory_files(directory)
        except OSError as exc:
            problems.error(where, f"cannot list {directory}: {exc.strerror or exc}")
            continue
        for path in files:
            watch.append(str(path))
            layers.append((layer, path, where))
    entries: list[LayerEntry] = []
    for layer, path, where in layers:
        try:
            entries.extend(read_file(path, Source(layer, str(path)), problems))
        except MetadataFileError as exc:
            problems.error(where, str(exc))
    declared = reserved.union(*(e.aliases for e in entries))
    entries = [e for e in builtin if e.id not in declared] + entries
    return assemble(entries, problems, files=tuple(str(p) for _, p, _ in layers), watch=tuple(watch))


def files_digest(files: tuple[str, ...]) -> str:
    """What the metadata files add to the revision: a changed file is a new revision."""
    parts = []
    for name in files:
        try:
            parts.append(f"\0{name}\0{Path(name).read_text(encoding='utf-8', errors='replace')}")
        except OSError:
            parts.append(f"\0{name}\0<unreadable>")
    return "".join(parts)


@attrs.frozen
class ModelConfigEntry:
    id: str
    aliases: tuple[str, ...]
    upstream_id: str | None
    metadata: ModelMetadata


def model_configs(r: Reader, *, chain_model_name: Callable[[Any], str],
                  model_name: Callable[[Any], str]) -> list[ModelConfigEntry]:
    """``model_configs``: the spec's list of ``{id, aliases, upstream_id, metadata}``.

    Strict like the rest of config.yaml (unknown keys and wrong types are
    errors); metadata ranges only warn, as the spec says for runtime loads.
    """
    out: list[ModelConfigEntry] = []
    ids: dict[str, str] = {}
    for item in r.items("model_configs"):
        if not item.has("id"):
            item.problems.error(child(item.path, "id"), "is required")
        model = item.get("id", chain_model_name, "")
        aliases: tuple[str, ...] = item.get("aliases", rules.string_list(model_name), ())
        upstream_id = item.get("upstream_id", rules.string(), None)
        raw = item.section("metadata")
        meta = ModelMetadata.from_dict(validate_metadata(raw.raw, raw.path, model, r.problems, strict=True))
        item.finish()
        if not model:
            continue
        if model in ids:
            r.problems.error(child(item.path, "id"), f"duplicate model id {model!r} (also {ids[model]})")
            continue
        ids[model] = item.path
        out.append(ModelConfigEntry(model, aliases, upstream_id, meta))
    # An upstream id is only ever sent upstream; if it named another public id
    # of this backend, two routing names would collide on one wire name.
    for e in out:
        if e.upstream_id and e.upstream_id in ids and e.upstream_id != e.id:
            r.problems.error(child(ids[e.id], "upstream_id"),
                             f"{e.upstream_id!r} is another model_configs id of this backend")
    return out
