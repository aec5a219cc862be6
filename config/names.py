"""Model-name resolution: which catalogue entry a requested model name means.

This is the pure core of the model catalogue (no I/O, no clock, no trio).
Given a requested name and a ``Catalogue`` of entries (an id plus aliases,
where an alias holding ``*`` is a wildcard pattern), ``resolve`` returns the
entry and the stage that matched, trying the stages in this order and
stopping at the first hit:

1. EXACT_ID        the name is an entry id (case-sensitive)
2. EXACT_ALIAS     the name is an exact alias (case-sensitive)
3. DATE_SUFFIX     a trailing date was removed (-YYYYMMDD, -YYYY-MM-DD,
                   -YYMM, @YYYYMMDD)
4. PEEL            quantization / format / flavour tokens were peeled off the
                   right, or the name only differs in letter case
5. DATE_AND_PEEL   both a date and tokens were removed
6. HF_PREFIX       a ``vendor/`` or ``org/team/`` prefix was removed and the
                   rest matched by stages 1-5 (one re-entry, never recursive)
7. WILDCARD        the name matched a ``*`` alias
8. NAMESPACE_BASE  the name without its namespace matched a ``*`` alias

Stages 3-5 run as one loop over the case-folded name: at each step it tries
the ids, the exact aliases and the date rule, then removes one trailing date
or one allow-listed token and goes round again. Parameter-count tokens
(-32b, -a3b, -0.6b, -e4b) are not on the list, so they end the chain.

Every path is bounded: names over ``MAX_NAME_LENGTH`` characters only get
stages 1-2, the loop removes at most ``MAX_PEELS`` suffixes, the prefix strip
happens at most once, and wildcard matching is O(len(name) * len(pattern)).
docs/models.md is the user-facing description; keep the two in step.
"""

from __future__ import annotations

import re
import string
from enum import Enum
from typing import Iterable

import attrs
from attrs import frozen

MAX_NAME_LENGTH = 256
MAX_PEELS = 8
MAX_PREFIX_SEGMENTS = 3


class Stage(Enum):
    """How a name matched, in the order the stages are tried."""

    EXACT_ID = 1
    EXACT_ALIAS = 2
    DATE_SUFFIX = 3
    PEEL = 4
    DATE_AND_PEEL = 5
    HF_PREFIX = 6
    WILDCARD = 7
    NAMESPACE_BASE = 8


# --------------------------------------------------------------------------
# Case folding, dates, tokens: small pure helpers (public so tests and
# `metadata show` can explain a single step).

_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_ASCII_SPACE = frozenset(" \t\n\r\x0b\x0c")


def fold(name: str) -> str:
    """ASCII-only lower-casing: locale-free and never changes the length."""
    return name.translate(_FOLD)


def _digits(s: str, n: int) -> bool:
    return len(s) == n and all("0" <= c <= "9" for c in s)


def _month(mm: str) -> bool:
    return _digits(mm, 2) and 1 <= int(mm) <= 12


def _day(dd: str) -> bool:
    return _digits(dd, 2) and 1 <= int(dd) <= 31


def _yyyymmdd(s: str) -> bool:
    return _digits(s, 8) and s.startswith("20") and _month(s[4:6]) and _day(s[6:8])


def strip_date(name: str) -> str | None:
    """The name without one trailing date suffix, or None if it has none.

    Recognised: ``-YYYYMMDD``, ``-YYYY-MM-DD``, ``-YYMM`` and ``@YYYYMMDD``.
    Years in the long forms are 2000-2099, months 01-12, days 01-31; what is
    left in front must not be empty.
    """
    head, sep, tail = name.rpartition("@")
    if sep and head and _yyyymmdd(tail):
        return head
    head, sep, last = name.rpartition("-")
    if not sep or not head:
        return None
    if _yyyymmdd(last):
        return head
    if _digits(last, 4) and _month(last[2:]):
        return head
    if _day(last):
        rest, _, mm = head.rpartition("-")
        front, _, yyyy = rest.rpartition("-")
        if front and _month(mm) and _digits(yyyy, 4) and yyyy.startswith("20"):
            return front
    return None


# Allow-listed trailing tokens, matched against one lower-cased '-' segment.
TOKEN_CATEGORIES: dict[str, str] = {
    "BIT_WIDTH": r"(?:2|3|4|5|6|8|16)bit",
    "GGUF_QUANT": r"q[2-8]_k(?:_[sml])?|q[4-8]_[01]|iq[1-4]_(?:xxs|xs|s|m|nl)|bf16|f16|f32",
    "FP_FORMAT": r"fp4|fp8|fp16|fp32|nvfp4|mxfp4|mxfp8",
    "INT_FORMAT": r"int2|int4|int8",
    "WEIGHT_ACTIVATION": r"(?:quantized\.)?w[0-9]{1,2}a[0-9]{1,2}",
    "LIBRARY": r"awq|gptq|bnb|hqq|exl2|exl3|mlx",
    "IMATRIX": r"i[1-8]|q[2-8]",
    "UNSLOTH": r"unsloth",
    "CONTAINER": r"gguf|ggml|safetensors|onnx",
    "FLAVOR": r"it|instruct|chat|base|thinking|qat",
    "HARDWARE": r"rngd|warboy|atom|atommax|rebel",
}
_TOKENS = [(cat, re.compile(rx)) for cat, rx in TOKEN_CATEGORIES.items()]
# -block / -dynamic / -static only count right after an FP, INT or W/A token.
_SCALING = frozenset({"block", "dynamic", "static"})
_SCALABLE = re.compile("|".join(TOKEN_CATEGORIES[c] for c in ("FP_FORMAT", "INT_FORMAT", "WEIGHT_ACTIVATION")))
# Unsloth dynamic quants span two segments: -UD-Q4_K_XL, -UD-IQ2_XXS.
_UNSLOTH_DYNAMIC = re.compile(r"i?q[0-9]_[a-z0-9_]+")


def peel_token(name: str) -> tuple[str, str] | None:
    """Remove one allow-listed trailing token from a lower-cased name.

    Returns ``(rest, category)``, or None when the last segment is not on the
    list (a parameter count such as ``-32b`` never is) or nothing would be
    left in front.
    """
    rest, sep, last = name.rpartition("-")
    if not sep or not rest:
        return None
    front, sep2, prev = rest.rpartition("-")
    if prev == "ud" and sep2 and front and _UNSLOTH_DYNAMIC.fullmatch(last):
        return front, "UNSLOTH"
    if last in _SCALING:
        if sep2 and front and _SCALABLE.fullmatch(prev):
            return rest, "SCALING_GRANULARITY"
        return None
    for cat, rx in _TOKENS:
        if rx.fullmatch(last):
            return rest, cat
    return None


def hf_residue(name: str) -> str | None:
    """The repo part of ``vendor/repo`` or ``org/team/repo``, else None.

    At most ``MAX_PREFIX_SEGMENTS`` segments, none empty, none containing
    ASCII whitespace; otherwise the prefix is not stripped at all.
    """
    if "/" not in name:
        return None
    segments = name.split("/", MAX_PREFIX_SEGMENTS)
    if len(segments) > MAX_PREFIX_SEGMENTS:
        return None
    for seg in segments:
        if not seg or any(c in _ASCII_SPACE for c in seg):
            return None
    return segments[-1]


def glob_match(pattern: str, name: str) -> bool:
    """Case-sensitive match where only ``*`` is special (any run, even empty).

    Iterative with one backtrack point, so O(len(pattern) * len(name)).
    """
    p = s = 0
    star, mark = -1, 0
    while s < len(name):
        if p < len(pattern) and pattern[p] == "*":
            star, mark = p, s
            p += 1
        elif p < len(pattern) and pattern[p] == name[s]:
            p += 1
            s += 1
        elif star >= 0:
            p = star + 1
            mark += 1
            s = mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


# --------------------------------------------------------------------------
# Catalogue and resolution.


def _aliases(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("aliases must be a list of names, not one string")
    return tuple(value)


@frozen
class Entry:
    """One catalogue entry: its id and the other names it answers to."""

    id: str
    aliases: tuple[str, ...] = attrs.field(default=(), converter=_aliases)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("a model id must be a non-empty string")
        if "*" in self.id:
            raise ValueError(f"model id {self.id!r} contains '*'; wildcards belong in aliases")
        for alias in self.aliases:
            if not isinstance(alias, str) or not alias:
                raise ValueError(f"model {self.id!r}: aliases must be non-empty strings")


Hit = tuple[str, str]  # (entry id, the id / alias / pattern that matched)


def _entry(value: Entry | tuple[str, Iterable[str]] | str) -> Entry:
    if isinstance(value, Entry):
        return value
    if isinstance(value, str):
        return Entry(value)
    id_, aliases = value
    return Entry(id_, aliases)


def _entries(values: Iterable[Entry | tuple[str, Iterable[str]] | str]) -> tuple[Entry, ...]:
    return tuple(_entry(v) for v in values)


@frozen
class Catalogue:
    """Known model entries with their lookup indexes built once.

    Order matters only for ties: when two entries claim the same name (or two
    wildcards are equally specific) the earlier entry wins, so callers list
    higher-priority sources (backend ``model_configs``) first.
    """

    entries: tuple[Entry, ...] = attrs.field(default=(), converter=_entries)
    _ids: dict[str, Hit] = attrs.field(init=False, repr=False, eq=False)
    _aliases: dict[str, Hit] = attrs.field(init=False, repr=False, eq=False)
    _folded_ids: dict[str, Hit] = attrs.field(init=False, repr=False, eq=False)
    _folded_aliases: dict[str, Hit] = attrs.field(init=False, repr=False, eq=False)
    _dated_ids: dict[str, Hit] = attrs.field(init=False, repr=False, eq=False)
    _dated_aliases: dict[str, Hit] = attrs.field(init=False, repr=False, eq=False)
    _wildcards: tuple[tuple[str, str], ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        ids: dict[str, Hit] = {}
        aliases: dict[str, Hit] = {}
        folded_ids: dict[str, Hit] = {}
        folded_aliases: dict[str, Hit] = {}
        dated_ids: dict[str, Hit] = {}
        dated_aliases: dict[str, Hit] = {}
        wildcards: list[tuple[int, int, str, str]] = []
        for entry in self.entries:
            hit = (entry.id, entry.id)
            ids.setdefault(entry.id, hit)
            folded_ids.setdefault(fold(entry.id), hit)
            base = strip_date(fold(entry.id))
            if base is not None:
                dated_ids.setdefault(base, hit)
            for alias in entry.aliases:
                hit = (entry.id, alias)
                if "*" in alias:
                    literal = len(alias) - alias.count("*")
                    wildcards.append((-literal, len(wildcards), alias, entry.id))
                    continue
                aliases.setdefault(alias, hit)
                folded_aliases.setdefault(fold(alias), hit)
                base = strip_date(fold(alias))
                if base is not None:
                    dated_aliases.setdefault(base, hit)
        # Most literal characters first; equal ones keep catalogue order.
        wildcards.sort()
        set_ = object.__setattr__
        set_(self, "_ids", ids)
        set_(self, "_aliases", aliases)
        set_(self, "_folded_ids", folded_ids)
        set_(self, "_folded_aliases", folded_aliases)
        set_(self, "_dated_ids", dated_ids)
        set_(self, "_dated_aliases", dated_aliases)
        set_(self, "_wildcards", tuple((pattern, id_) for _, _, pattern, id_ in wildcards))

    @classmethod
    def of(cls, *entries: Entry | tuple[str, Iterable[str]] | str) -> Catalogue:
        """``Catalogue.of(("gpt-5.6-sol", ["gpt-5.6"]), "llama-3-70b")``."""
        return cls(entries)


@frozen
class Resolution:
    """Which entry a name resolved to and how.

    ``matched`` is the catalogue name that matched (the id, an alias or a
    wildcard pattern); ``steps`` are the names tried, in order, for
    ``metadata show``.
    """

    entry_id: str
    stage: Stage
    matched: str
    steps: tuple[str, ...]


@frozen
class Trace:
    """``explain``'s answer: the resolution (None on a miss) and every name tried."""

    resolution: Resolution | None
    steps: tuple[str, ...]


class _Steps(list[str]):
    def add(self, name: str) -> None:
        if not self or self[-1] != name:
            self.append(name)


def _exact(cat: Catalogue, name: str) -> tuple[Hit, Stage] | None:
    if (hit := cat._ids.get(name)) is not None:
        return hit, Stage.EXACT_ID
    if (hit := cat._aliases.get(name)) is not None:
        return hit, Stage.EXACT_ALIAS
    return None


def _chain(cat: Catalogue, name: str, steps: _Steps) -> tuple[Hit, Stage] | None:
    """Stages 3-5: case-folded id / alias / date checks, peeling in between."""
    current = fold(name)
    dated = peeled = False
    removed = 0
    while True:
        steps.add(current)
        hit = cat._folded_ids.get(current) or cat._folded_aliases.get(current)
        base = strip_date(current)
        if hit is None and base is not None:
            steps.add(base)
            hit = (cat._folded_ids.get(base) or cat._folded_aliases.get(base)
                   or cat._dated_ids.get(base) or cat._dated_aliases.get(base))
            if hit is not None:
                dated = True
        if hit is not None:
            if dated and peeled:
                return hit, Stage.DATE_AND_PEEL
            return hit, Stage.DATE_SUFFIX if dated else Stage.PEEL
        if removed >= MAX_PEELS:
            return None
        if base is not None:
            current, dated = base, True
        else:
            peeled_once = peel_token(current)
            if peeled_once is None:
                return None
            current, peeled = peeled_once[0], True
        removed += 1


def _wildcard(cat: Catalogue, name: str) -> Hit | None:
    for pattern, id_ in cat._wildcards:
        if glob_match(pattern, name):
            return id_, pattern
    return None


def explain(name: str, catalogue: Catalogue) -> Trace:
    """Resolve ``name`` and keep the names tried even when nothing matched."""
    if not isinstance(name, str):
        raise TypeError(f"model name must be a string, not {type(name).__name__}")
    steps = _Steps([name])

    def done(hit: Hit, stage: Stage) -> Trace:
        frozen_steps = tuple(steps)
        return Trace(Resolution(hit[0], stage, hit[1], frozen_steps), frozen_steps)

    if (found := _exact(catalogue, name)) is not None:
        return done(*found)
    if len(name) > MAX_NAME_LENGTH:
        return Trace(None, tuple(steps))
    if (found := _chain(catalogue, name, steps)) is not None:
        return done(*found)
    residue = hf_residue(name)
    if residue is not None:
        steps.add(residue)
        found = _exact(catalogue, residue) or _chain(catalogue, residue, steps)
        if found is not None:
            return done(found[0], Stage.HF_PREFIX)
    if (hit := _wildcard(catalogue, name)) is not None:
        return done(hit, Stage.WILDCARD)
    if residue is not None and (hit := _wildcard(catalogue, residue)) is not None:
        steps.add(residue)
        return done(hit, Stage.NAMESPACE_BASE)
    return Trace(None, tuple(steps))


def resolve(name: str, catalogue: Catalogue) -> Resolution | None:
    """The entry ``name`` resolves to and how, or None if nothing matches."""
    return explain(name, catalogue).resolution
