"""vLLM's KV-cache event batches, decoded from its wire into ``events.EventBatch``. Pure.

vLLM's publisher (``--kv-events-config``) encodes each batch with msgspec:
``EventBatch(ts, events, data_parallel_rank)``, each event tagged by its
class name. Its shape moved over releases, and every shape is read here:

- both levels as an array (``[ts, events, rank]``; an event ``[tag, f1, f2,
  ...]``) or as a map (``{"ts": ...}``; an event ``{"type": tag, ...}``):
  events became maps in 2026 (vLLM PR #42892), the batch may follow;
- arrays from older engines are shorter (a missing field is None), newer
  ones longer (extra elements ignored); maps omit fields left at their
  default and may carry keys this reader does not know (ignored);
- block hashes are ints (64-bit, negative from old ``builtin`` hashing) or
  32 bytes (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0``); a string (the JSON
  form has no bytes) is kept as its UTF-8 bytes: an opaque identity;
- offload events (``medium`` other than GPU) may have no ``token_ids``.

A stored block whose engine hash covers more than its tokens (``extra_keys``
beyond the LoRA adapter's name: a cache salt, a multimodal input) cannot be
matched by the index's keys over tokens, so its event is left out too.

The SSE event sources send the same batch as JSON (either shape). Events of
a type this reader does not know, and those of a hybrid model's other KV
groups (sliding-window layers keep other blocks), are left out and named in
``Decoded.skipped``. Anything else not as described raises ``MalformedBatch``
naming the place and the rule; the reader counts it and goes on.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec
from attrs import frozen

from switchyard.actors.kv.events import AllBlocksCleared, BlockRemoved, BlockStored, EngineHash, Event, EventBatch

# The fields of each event in their declared order: the array form's positions after the tag.
STORED_FIELDS = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
                 "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window")
REMOVED_FIELDS = ("block_hashes", "medium", "group_idx")
BATCH_FIELDS = ("ts", "events", "data_parallel_rank")
_REQUIRED = {"BlockStored": ("block_hashes", "token_ids", "block_size"), "BlockRemoved": ("block_hashes",),
             "AllBlocksCleared": ()}
_FIELDS = {"BlockStored": STORED_FIELDS, "BlockRemoved": REMOVED_FIELDS, "AllBlocksCleared": ()}
_MISSING: Any = object()


class MalformedBatch(ValueError):
    """A payload that is not an event batch of any known shape; the message names where and why."""


@frozen
class Decoded:
    batch: EventBatch
    skipped: tuple[str, ...] = ()   # events left out on purpose, one reason each


def decode_msgpack(seq: int, payload: bytes) -> Decoded:
    """The third frame of a ZMQ message (the second is ``seq``)."""
    return _decode(seq, payload, msgspec.msgpack.decode, "msgpack")


def decode_json(seq: int, data: bytes | str) -> Decoded:
    """An SSE event's ``data`` (its ``id`` is ``seq``)."""
    return _decode(seq, data, msgspec.json.decode, "JSON")


def _decode(seq: int, raw: bytes | str, parse: Callable[[Any], Any], form: str) -> Decoded:
    try:
        value = parse(raw)
    except msgspec.DecodeError as exc:
        raise MalformedBatch(f"not {form}: {exc}") from None
    except RecursionError:   # msgspec's own limit on nesting
        raise MalformedBatch(f"not {form}: nested too deeply") from None
    return decode_value(seq, value)


def decode_value(seq: int, value: Any) -> Decoded:
    """A batch already parsed into lists, maps and scalars."""
    fields = _fields(value, BATCH_FIELDS, "batch")
    ts, events, rank = fields["ts"], fields["events"], fields["data_parallel_rank"]
    if not _is_number(ts):
        raise MalformedBatch(f"ts: expected a number, got {_kind(ts)}")
    try:
        ts = float(ts)
    except OverflowError:   # JSON's integers have no bound
        raise MalformedBatch("ts: a number too large") from None
    if not isinstance(events, list):
        raise MalformedBatch(f"events: expected a list, got {_kind(events)}")
    if rank is not None and not _is_int(rank):
        raise MalformedBatch(f"data_parallel_rank: expected an integer or null, got {_kind(rank)}")
    decoded: list[Event] = []
    skipped: list[str] = []
    for i, raw in enumerate(events):
        event, why = _event(raw, f"events[{i}]")
        if event is not None:
            decoded.append(event)
        else:
            skipped.append(f"events[{i}]: {why}")
    return Decoded(EventBatch(seq, ts, tuple(decoded), rank), tuple(skipped))


def _event(raw: Any, where: str) -> tuple[Event | None, str]:
    if isinstance(raw, list):
        tag = raw[0] if raw else _MISSING
    elif isinstance(raw, dict):
        tag = raw.get("type", _MISSING)
    else:
        raise MalformedBatch(f"{where}: expected an array or a map, got {_kind(raw)}")
    if not isinstance(tag, str):
        raise MalformedBatch(f"{where}: the event's type tag is missing or not a string")
    if tag not in _FIELDS:
        return None, f"unknown event type {tag!r}"
    f = _fields(raw[1:] if isinstance(raw, list) else raw, _FIELDS[tag], f"{where} ({tag})")
    for name in _REQUIRED[tag]:
        if f[name] is None:
            raise MalformedBatch(f"{where} ({tag}): {name} is missing")
    where = f"{where} ({tag})"
    if tag == "AllBlocksCleared":
        return AllBlocksCleared(), ""
    other_group = _other_group(f, where)
    if other_group:
        return None, other_group
    hashes = _hashes(f["block_hashes"], f"{where}.block_hashes")
    medium = _optional_str(f["medium"], f"{where}.medium")
    if tag == "BlockRemoved":
        return BlockRemoved(hashes, medium), ""
    parent = None if f["parent_block_hash"] is None else _hash(f["parent_block_hash"], f"{where}.parent_block_hash")
    tokens = f["token_ids"]
    if not isinstance(tokens, list) or not all(_is_int(t) and t >= 0 for t in tokens):
        raise MalformedBatch(f"{where}.token_ids: expected a list of non-negative integers")
    size = f["block_size"]
    if not _is_int(size) or size < 0:
        raise MalformedBatch(f"{where}.block_size: expected a non-negative integer, got {size!r}")
    lora = _optional_str(f["lora_name"], f"{where}.lora_name")
    if _keyed_beyond_tokens(f["extra_keys"], lora, f"{where}.extra_keys"):
        return None, "extra_keys: blocks keyed by more than their tokens (cache salt, multimodal input, embeddings)"
    return BlockStored(hashes, parent, tuple(tokens), size, medium, lora), ""


def _keyed_beyond_tokens(extra: Any, lora: str | None, where: str) -> bool:
    """Whether any block's extra keys hold more than the LoRA adapter's name: a cache salt, a multimodal
    item's hash or prompt embeddings make the engine's block differ from another with the same tokens, which
    a key over tokens alone would take for it."""
    if extra is None:
        return False
    if not isinstance(extra, list):
        raise MalformedBatch(f"{where}: expected a list (one entry per block), got {_kind(extra)}")
    own = [lora] if lora is not None else []
    return any(keys is not None and (not isinstance(keys, list) or keys != own) for keys in extra)


def _fields(raw: Any, names: tuple[str, ...], where: str) -> dict[str, Any]:
    """A struct's fields by name, from its array form (by position; missing: None; extra: ignored) or its map
    form (missing: None; unknown keys ignored)."""
    if isinstance(raw, list):
        return {name: raw[i] if i < len(raw) else None for i, name in enumerate(names)}
    if isinstance(raw, dict):
        return {name: raw.get(name) for name in names}
    raise MalformedBatch(f"{where}: expected an array or a map, got {_kind(raw)}")


def _other_group(f: dict[str, Any], where: str) -> str:
    """Why an event of a hybrid model belongs to a KV group the index does not follow ("" when it does): the
    full-attention group's blocks are the prompt's prefix; a sliding-window group's are not."""
    kind, group = f.get("kv_cache_spec_kind"), f.get("group_idx")
    if kind is not None:
        if not isinstance(kind, str):
            raise MalformedBatch(f"{where}.kv_cache_spec_kind: expected a string, got {_kind(kind)}")
        return "" if kind == "full_attention" else f"kv_cache_spec_kind {kind!r}"
    if group is not None:
        if not _is_int(group):
            raise MalformedBatch(f"{where}.group_idx: expected an integer, got {_kind(group)}")
        return "" if group == 0 else f"group_idx {group}"
    return ""


def _hashes(raw: Any, where: str) -> tuple[EngineHash, ...]:
    if not isinstance(raw, list):
        raise MalformedBatch(f"{where}: expected a list, got {_kind(raw)}")
    return tuple(_hash(h, f"{where}[{i}]") for i, h in enumerate(raw))


def _hash(raw: Any, where: str) -> EngineHash:
    if _is_int(raw) or isinstance(raw, bytes):
        return raw  # type: ignore[no-any-return]
    if isinstance(raw, str) and raw:
        return raw.encode("utf-8")
    raise MalformedBatch(f"{where}: a block hash is an integer or bytes, got {_kind(raw)}")


def _optional_str(raw: Any, where: str) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw
    raise MalformedBatch(f"{where}: expected a string or null, got {_kind(raw)}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__
