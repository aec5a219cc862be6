"""Small value rules and a mapping reader that reports by dotted path.

A rule converts one raw YAML value or raises ``Invalid`` with a sentence that
says what was expected; the ``Reader`` attaches the field path. Collecting
every problem (instead of stopping at the first) lets `config validate` print
them all in one go.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping, TypeVar

import attrs

from switchyard.config import contract

T = TypeVar("T")
Rule = Callable[[Any], T]


class Invalid(ValueError):
    pass


@attrs.define
class Problems:
    errors: list[str] = attrs.Factory(list)
    warnings: list[str] = attrs.Factory(list)

    failed_paths: set[str] = attrs.Factory(set)
    unsupported: list[str] = attrs.Factory(list)   # contract keys refused (config/contract.py)

    def error(self, path: str, rule: str) -> None:
        # One error per path: a value that already failed (say, a missing
        # ${ENV}) should not also be reported as empty.
        # A list whose item already failed (say, a missing ${ENV}) is not
        # reported again as a whole. Only list items: mapping keys may hold
        # dots (model names), so a dotted prefix says nothing about nesting.
        if path in self.failed_paths or any(f.startswith(path + "[") for f in self.failed_paths):
            return
        self.failed_paths.add(path)
        self.errors.append(f"{path}: {rule}")

    def refuse(self, path: str, why: str) -> None:
        """A key of the contract this gateway does not implement: an error, listed apart too."""
        if path not in self.failed_paths:
            self.unsupported.append(path)
        self.error(path, why)

    def warn(self, path: str, rule: str) -> None:
        self.warnings.append(f"{path}: {rule}")


def child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string",
            list: "list", dict: "mapping", type(None): "null"}.get(type(value), type(value).__name__)


class Reader:
    """Reads the keys of one mapping; whatever it never asked for is unknown."""

    def __init__(self, raw: Any, path: str, problems: Problems) -> None:
        self.path = path
        self.problems = problems
        self._seen: set[str] = set()
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            problems.error(path or "<top level>", f"must be a mapping, got {type_name(raw)}")
            raw = {}
        self.raw: Mapping[str, Any] = raw

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def get(self, key: str, rule: Rule[T], default: T) -> T:
        """The converted value, or the default when absent/null or invalid."""
        self._seen.add(key)
        value = self.raw.get(key)
        if value is None:
            return default
        try:
            return rule(value)
        except Invalid as exc:
            self.problems.error(child(self.path, key), str(exc))
            return default

    def section(self, key: str) -> "Reader":
        self._seen.add(key)
        return Reader(self.raw.get(key), child(self.path, key), self.problems)

    def items(self, key: str) -> list["Reader"]:
        """Readers for each mapping in a list-valued key."""
        self._seen.add(key)
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.problems.error(child(self.path, key), f"must be a list, got {type_name(value)}")
            return []
        return [Reader(item, child(child(self.path, key), i), self.problems) for i, item in enumerate(value)]

    def finish(self) -> None:
        for key in self.raw:
            if key not in self._seen:
                path = child(self.path, str(key))
                why = contract.refusal(path)
                if why is None:
                    self.problems.error(path, "unknown key")
                else:
                    self.problems.refuse(path, why)


# --- rules ---------------------------------------------------------------

def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"must be true or false, got {type_name(value)}")
    return value


def integer(minimum: int | None = None, maximum: int | None = None) -> Rule[int]:
    def rule(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"must be an integer, got {type_name(value)}")
        _check_range(value, minimum, maximum)
        return value
    return rule


def number(minimum: float | None = None, maximum: float | None = None) -> Rule[float]:
    def rule(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(f"must be a number, got {type_name(value)}")
        if not math.isfinite(value):
            raise Invalid("must be a finite number")
        _check_range(value, minimum, maximum)
        return float(value)
    return rule


def _check_range(value: float, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and value < minimum:
        raise Invalid(f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise Invalid(f"must be at most {maximum}, got {value}")


def string(pattern: str | None = None, what: str | None = None) -> Rule[str]:
    compiled = re.compile(pattern) if pattern else None

    def rule(value: Any) -> str:
        if not isinstance(value, str):
            raise Invalid(f"must be a string, got {type_name(value)}")
        if not value:
            raise Invalid("must not be empty")
        if compiled and not compiled.fullmatch(value):
            raise Invalid(f"must be {what or 'match ' + compiled.pattern}, got {value!r}")
        return value
    return rule


def any_string(value: Any) -> str:
    """Any string, the empty one included (for values where empty means something)."""
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {type_name(value)}")
    return value


def one_of(choices: Mapping[str, T]) -> Rule[T]:
    def rule(value: Any) -> T:
        if not isinstance(value, str) or value not in choices:
            raise Invalid(f"must be one of {', '.join(c if c else repr(c) for c in choices)}, got {value!r}")
        return choices[value]
    return rule


def list_of(item: Rule[T], what: str) -> Rule[tuple[T, ...]]:
    """A list whose every item passes ``item``; the error names the item's index."""
    def rule(value: Any) -> tuple[T, ...]:
        if not isinstance(value, list):
            raise Invalid(f"must be a list of {what}, got {type_name(value)}")
        out = []
        for i, entry in enumerate(value):
            try:
                out.append(item(entry))
            except Invalid as exc:
                raise Invalid(f"item [{i}] {exc}") from None
        return tuple(out)
    return rule


def string_list(item: Rule[str]) -> Rule[tuple[str, ...]]:
    return list_of(item, "strings")


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration(minimum: float = 0.0, maximum: float | None = None, allow_zero: bool = False) -> Rule[float]:
    """Seconds from a number or a string like ``500ms``, ``10s``, ``1m30s``, ``90d``."""

    def rule(value: Any) -> float:
        if isinstance(value, bool):
            raise Invalid("must be a duration like 10s or 500ms, got boolean")
        if isinstance(value, (int, float)):
            seconds = float(value)
        elif isinstance(value, str):
            text = value.strip()
            parts = _DURATION_PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise Invalid(f"must be a duration like 10s, 500ms or 1m30s, got {value!r}")
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
        else:
            raise Invalid(f"must be a duration like 10s or 500ms, got {type_name(value)}")
        if not math.isfinite(seconds) or seconds < 0:
            raise Invalid(f"must be a non-negative duration, got {value!r}")
        if seconds == 0 and not allow_zero:
            raise Invalid("must be greater than zero")
        if seconds < minimum:
            raise Invalid(f"must be at least {minimum:g}s, got {value!r}")
        if maximum is not None and seconds > maximum:
            raise Invalid(f"must be at most {maximum:g}s, got {value!r}")
        return seconds
    return rule


_SIZE = re.compile(r"(\d+)\s*(B|KB|KiB|MB|MiB|GB|GiB)?")
_SIZE_UNITS = {None: 1, "B": 1, "KB": 1000, "KiB": 1024, "MB": 1000**2, "MiB": 1024**2,
               "GB": 1000**3, "GiB": 1024**3}


def size(minimum: int = 1, maximum: int | None = None) -> Rule[int]:
    """Bytes from an integer or a string like ``10MiB``."""

    def rule(value: Any) -> int:
        if isinstance(value, bool):
            raise Invalid("must be a size in bytes, got boolean")
        if isinstance(value, int):
            amount = value
        elif isinstance(value, str) and (m := _SIZE.fullmatch(value.strip())):
            amount = int(m.group(1)) * _SIZE_UNITS[m.group(2)]
        else:
            raise Invalid(f"must be a size like 1048576 or 10MiB, got {value!r}")
        _check_range(amount, minimum, maximum)
        return amount
    return rule
