"""What is special in loading the resilience sections: ``timeouts``, ``retry``, ``fallback``, ``circuit_breaker``.

Each field's rule and default is declared in ``resilience.py`` and read by
``fields.load_section``; ``streaming`` needs nothing more. What stays here is
what a walk cannot say: ``timeouts`` nests its fields differently in YAML
and checks them against each other, ``retry`` compares its two delays
(``circuit_breaker`` its two cooldowns, and its minimum calls with its threshold),
``fallback`` has maps keyed by model name, and the chains are checked against
the backends. Cross-field checks run only on values that were given and
valid, so one mistake never produces a second, derived error.
"""

from __future__ import annotations

from typing import Any, Iterable

from switchyard.config.fields import load_section, read
from switchyard.config.quality_check import QualityCheck
from switchyard.config.resilience import (
    CircuitBreaker,
    Fallback,
    ModelFallbackSettings,
    ModelTimeouts,
    RetryPolicy,
    StandardTimeouts,
    StreamingTimeouts,
    Timeouts,
)
from switchyard.config.rules import Invalid, Problems, Reader, child, string_list, type_name

# --- rules -------------------------------------------------------------------

MODEL_NAME_MAX_BYTES = 128
MODEL_NAME_PUNCTUATION = "-_./:"
SHOWN_MAX_CHARS = 128


def _escaped(value: str) -> str:
    """``value`` quoted and escaped like ``repr``, cut to 128 characters of escaped text."""
    pieces: list[str] = []
    used = 0
    for ch in value:
        piece = "\\'" if ch == "'" else "\\\\" if ch == "\\" else repr(ch)[1:-1]
        if used + len(piece) > SHOWN_MAX_CHARS:
            return "'" + "".join(pieces) + "'..."
        pieces.append(piece)
        used += len(piece)
    return "'" + "".join(pieces) + "'"


def chain_model_name(value: Any) -> str:
    """A served model id as fallback chains name it: 1-128 UTF-8 bytes of letters, digits, ``-_./:``."""
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {type_name(value)}")
    if not value:
        raise Invalid("model name must not be empty")
    for i, ch in enumerate(value):
        if not (ch.isalnum() or ch in MODEL_NAME_PUNCTUATION):
            offset = len(value[:i].encode("utf-8", "surrogatepass"))
            raise Invalid(f"model name has {ch!r} (U+{ord(ch):04X}) at byte offset {offset}; only letters, "
                          f"digits and - _ . / : are allowed (got {_escaped(value)})")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MODEL_NAME_MAX_BYTES:
        raise Invalid(f"model name is {size} bytes long in UTF-8; at most {MODEL_NAME_MAX_BYTES} are allowed "
                      f"(got {_escaped(value)})")
    return value


def seconds(value: float) -> str:
    return f"{value:g}s"


# --- helpers -----------------------------------------------------------------

def _given(r: Reader, key: str) -> bool:
    """Whether ``key`` (already read) was written in the file and is valid."""
    return r.has(key) and child(r.path, key) not in r.problems.failed_paths


def by_model(r: Reader, key: str) -> list[tuple[str, Any, str]]:
    """``(name, raw value, path)`` for each entry of a mapping keyed by model name.

    A bad name is reported at the entry's path; the entry is still returned
    so that its value is checked too.
    """
    section = r.section(key)   # reports a value that is not a mapping
    out = []
    for name, value in section.raw.items():
        path = child(section.path, str(name))
        try:
            chain_model_name(name)
        except Invalid as exc:
            r.problems.error(path, str(exc))
        out.append((str(name), value, path))
    return out


# --- timeouts ----------------------------------------------------------------

def _warn_past_total(st: Reader, limits: dict[str, tuple[float, bool]], total: tuple[float, bool]) -> None:
    """Warn when first_byte or chunk_interval is longer than total (values, and whether written).

    The warning goes to the key that was written: the limit itself, or else
    ``total`` when only that was set. Nothing is said about values not written
    here, nor about values that failed.
    """
    total_value, total_written = total
    if child(st.path, "total") in st.problems.failed_paths:
        return
    for key, (value, written) in limits.items():
        if value <= total_value or child(st.path, key) in st.problems.failed_paths:
            continue
        if written:
            st.problems.warn(child(st.path, key), "is longer than total: the total limit ends the stream first")
        elif total_written:
            st.problems.warn(child(st.path, "total"), f"is shorter than {key} ({seconds(value)}): "
                                                      "the total limit ends the stream first")


def timeouts(r: Reader) -> Timeouts:
    """Special: YAML nests the limits under ``request`` and ``limits``, and they are judged together."""
    connection = read(r, Timeouts, "connection")

    limits = r.section("limits")
    max_chunk = read(limits, Timeouts, "max_chunk_interval")
    max_chunk_ok = _given(limits, "max_chunk_interval")
    limits.finish()
    # An invalid max_chunk_interval is its own error; chunk intervals are then not judged against it.
    max_chunk_valid = max_chunk_ok or not limits.has("max_chunk_interval")

    def check_chunk(path: str, value: float, written: bool) -> None:
        if max_chunk_valid and value > max_chunk:
            note = "" if written else f" (not set: the default is {seconds(value)})"
            r.problems.error(path, f"is too large, maximum is {seconds(max_chunk)}{note}")

    request = r.section("request")
    standard = load_section(StandardTimeouts, request.section("standard"))
    st = request.section("streaming")
    streaming = load_section(StreamingTimeouts, st)
    chunk_path = child(st.path, "chunk_interval")
    if chunk_path not in r.problems.failed_paths:
        check_chunk(chunk_path, streaming.chunk_interval, _given(st, "chunk_interval"))
    _warn_past_total(st, {"first_byte": (streaming.first_byte, _given(st, "first_byte")),
                          "chunk_interval": (streaming.chunk_interval, _given(st, "chunk_interval"))},
                     (streaming.total, _given(st, "total")))

    overrides = {}
    for name, raw, path in by_model(request, "model_overrides"):
        overrides[name] = _model_timeouts(Reader(raw, path, r.problems), streaming, check_chunk)
    request.finish()

    out = Timeouts(connection=connection, standard=standard, streaming=streaming, model_overrides=overrides,
                   max_chunk_interval=max_chunk,
                   streaming_fallback_budget_multiplier=read(r, Timeouts, "streaming_fallback_budget_multiplier"))
    r.finish()
    return out


def _model_timeouts(r: Reader, general: StreamingTimeouts, check_chunk: Any) -> ModelTimeouts:
    """One model's overrides: the general rules, None where not written."""
    s = r.section("standard")
    standard_first_byte = read(s, StandardTimeouts, "first_byte", None)
    standard_total = read(s, StandardTimeouts, "total", None)
    s.finish()
    st = r.section("streaming")
    first_byte = read(st, StreamingTimeouts, "first_byte", None)
    chunk = read(st, StreamingTimeouts, "chunk_interval", None)
    total = read(st, StreamingTimeouts, "total", None)
    first_byte_ok, chunk_ok, total_ok = (_given(st, k) for k in ("first_byte", "chunk_interval", "total"))
    st.finish()
    r.finish()
    if chunk_ok:
        check_chunk(child(st.path, "chunk_interval"), chunk, True)
    # Judge what applies to this model: the override where given, else the general value.
    _warn_past_total(st, {"first_byte": (first_byte if first_byte_ok else general.first_byte, first_byte_ok),
                          "chunk_interval": (chunk if chunk_ok else general.chunk_interval, chunk_ok)},
                     (total if total_ok else general.total, total_ok))
    return ModelTimeouts(standard_first_byte=standard_first_byte, standard_total=standard_total,
                         first_byte=first_byte, chunk_interval=chunk, total=total)


# --- retry -------------------------------------------------------------------

def retry_policy(r: Reader, *, with_timeout: bool = False) -> RetryPolicy:
    """The top-level ``retry`` section, or with ``with_timeout`` a backend's ``retry_override``.

    Special for one check: max_delay must not be below initial_delay. An
    override is a complete policy: keys it leaves out take the defaults, not
    the values of the top-level ``retry`` section. Only an override may set
    ``timeout``.
    """
    if with_timeout:
        return load_section(RetryPolicy, r, _check_delays)
    return load_section(RetryPolicy, r, _check_delays, timeout=None)


def _check_delays(out: RetryPolicy, r: Reader) -> None:
    # Compare only values that are valid; a missing one is the default.
    if (_given(r, "initial_delay") or _given(r, "max_delay")) and out.max_delay < out.initial_delay \
            and not {child(r.path, "initial_delay"), child(r.path, "max_delay")} & r.problems.failed_paths:
        r.problems.error(child(r.path, "max_delay"), f"must be at least initial_delay ({seconds(out.initial_delay)}), "
                                                     f"got {seconds(out.max_delay)}")


# --- circuit_breaker ---------------------------------------------------------

def circuit_breaker(r: Reader) -> CircuitBreaker:
    """Special for two checks: the cooldown's cap must not be below the first cooldown, and a
    ``minimum_calls`` below ``failure_threshold`` says nothing (the failures are calls too)."""
    return load_section(CircuitBreaker, r, _check_circuit_breaker)


def _check_circuit_breaker(out: CircuitBreaker, r: Reader) -> None:
    failed = r.problems.failed_paths
    if out.max_timeout < out.timeout and not {child(r.path, "timeout"), child(r.path, "max_timeout")} & failed:
        r.problems.error(child(r.path, "max_timeout"), f"must be at least timeout ({seconds(out.timeout)}), "
                                                       f"got {seconds(out.max_timeout)}")
    if _given(r, "minimum_calls") and _given(r, "failure_threshold") \
            and out.minimum_calls is not None and out.failure_threshold is not None \
            and out.minimum_calls < out.failure_threshold:
        r.problems.warn(child(r.path, "minimum_calls"),
                        f"is below failure_threshold ({out.failure_threshold}): the {out.failure_threshold} "
                        "failures that open a circuit are that many calls already")


# --- fallback ----------------------------------------------------------------

def fallback(r: Reader) -> Fallback:
    """Special: the chains and per-model settings are keyed by model name, and chains are checked."""
    chains = _chains(r)
    settings = {name: load_section(ModelFallbackSettings, Reader(raw, path, r.problems))
                for name, raw, path in by_model(r, "model_settings")}
    out = load_section(Fallback, r, fallback_chains=chains, model_settings=settings,
                       quality_check=quality_check(r.section("quality_check")))
    if not out.enabled and chains:
        r.problems.warn(child(r.path, "fallback_chains"), "chains are ignored while fallback.enabled is false")
    return out


def quality_check(r: Reader) -> QualityCheck:
    """``fallback.quality_check``: its ``models`` are chains' primary models, named as chains name them."""
    models: tuple[str, ...] = r.get("models", string_list(chain_model_name), ())
    return load_section(QualityCheck, r, models=models)


def _chains(r: Reader) -> dict[str, tuple[str, ...]]:
    chains: dict[str, tuple[str, ...]] = {}
    for key, raw, path in by_model(r, "fallback_chains"):
        if raw is None or raw == []:
            r.problems.error(path, "must list at least one model")
            chains[key] = ()
            continue
        if not isinstance(raw, list):
            r.problems.error(path, f"must be a list of model names, got {type_name(raw)}")
            chains[key] = ()
            continue
        seen: dict[str, str] = {}
        models = []
        for i, entry in enumerate(raw):
            entry_path = child(path, i)
            try:
                name = chain_model_name(entry)
            except Invalid as exc:
                r.problems.error(entry_path, str(exc))
                continue
            if name == key:
                r.problems.error(entry_path, f"names the chain's own model {key!r}")
            elif name in seen:
                r.problems.error(entry_path, f"duplicate model {name!r} (also {seen[name]})")
            else:
                seen[name] = entry_path
                models.append(name)
        chains[key] = tuple(models)
    return chains


def chains_checked_at_load(backends: Iterable[Any]) -> bool:
    """Whether every backend's models are known without discovery: exact names only, discovery off."""
    return not any(b.discovery or b.model_globs for b in backends)


def check_chain_models(fb: Fallback, backends: Iterable[Any], problems: Problems,
                       path: str = "fallback.fallback_chains") -> None:
    """Warn about chain entries that no backend can serve.

    Only exact names in ``backends[].models`` are known at load time, so the
    check is skipped entirely when any backend has discovery on or a glob;
    the discovery actor makes it then, once it has the backends' lists.
    """
    backends = list(backends)
    if not chains_checked_at_load(backends):
        return
    known = {m for b in backends for m in b.exact_models}
    for key, models in fb.fallback_chains.items():
        for i, model in enumerate(models):
            if model not in known:
                problems.warn(child(child(path, key), i),
                              f"no backend lists model {model!r}: this step of the chain never finds a backend")
