"""Loading the resilience sections: ``timeouts``, ``retry``, ``fallback``, ``streaming``.

Split from ``load.py`` like ``resilience.py`` is split from ``schema.py``. The
same conventions hold: every problem is reported at its dotted path through
``Problems``, unknown keys are errors (``Reader.finish``), and a key gets at
most one error. Cross-field checks run only on values that were given and
valid, so one mistake never produces a second, derived error.
"""

from __future__ import annotations

from typing import Any, Iterable

from switchyard.config import rules
from switchyard.config.resilience import (
    MAX_CHUNK_INTERVAL_CEILING,
    RETRYABLE_ERRORS,
    EmptyReplyRetry,
    Fallback,
    FallbackPolicy,
    MidStreamFallback,
    ModelFallbackSettings,
    ModelTimeouts,
    RetryPolicy,
    StandardTimeouts,
    Streaming,
    StreamingTimeouts,
    Timeouts,
    TriggerConditions,
)
from switchyard.config.rules import Invalid, Problems, Reader, Rule, T, child, type_name

# --- rules -------------------------------------------------------------------

MODEL_NAME_MAX_BYTES = 128
MODEL_NAME_PUNCTUATION = "-_./:"
SHOWN_MAX_CHARS = 128
CONTINUATION_PROMPT_MAX_CHARS = 4096


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


def integer_set(minimum: int, maximum: int) -> Rule[frozenset[int]]:
    items = rules.list_of(rules.integer(minimum, maximum), "integers")
    return lambda value: frozenset(items(value))


def retryable_error_names(value: Any) -> frozenset[str]:
    names = rules.string_list(rules.one_of({name: name for name in RETRYABLE_ERRORS}))(value)
    return frozenset(names)


def continuation_prompt(value: Any) -> str:
    text = rules.string()(value)
    if not text.strip():
        raise Invalid("must not be only whitespace")
    if len(text) > CONTINUATION_PROMPT_MAX_CHARS:
        raise Invalid(f"must be at most {CONTINUATION_PROMPT_MAX_CHARS} characters, got {len(text)}")
    return text


HTTP_ERROR_STATUS = integer_set(400, 599)
_REPLAY_WORDS = rules.one_of({"enabled": True, "disabled": False})


def replay(value: Any) -> bool:
    """``enabled``/``disabled`` only: YAML reads ``on``/``off``/``yes``/``no`` as booleans, which are refused."""
    if isinstance(value, bool):
        raise Invalid("must be one of enabled, disabled, got boolean")
    return _REPLAY_WORDS(value)


def seconds(value: float) -> str:
    return f"{value:g}s"


# --- helpers -----------------------------------------------------------------

def _given(r: Reader, key: str, rule: Rule[T], default: T) -> tuple[T, bool]:
    """The value, and whether it was written in the file and is valid."""
    value = r.get(key, rule, default)
    return value, r.has(key) and child(r.path, key) not in r.problems.failed_paths


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
    d = Timeouts()
    positive = rules.duration()
    connection = r.get("connection", rules.duration(maximum=300), d.connection)

    limits = r.section("limits")
    max_chunk, max_chunk_ok = _given(limits, "max_chunk_interval",
                                     rules.duration(maximum=MAX_CHUNK_INTERVAL_CEILING), d.max_chunk_interval)
    limits.finish()
    # An invalid max_chunk_interval is its own error; chunk intervals are then not judged against it.
    max_chunk_valid = max_chunk_ok or not limits.has("max_chunk_interval")

    def check_chunk(path: str, value: float, written: bool) -> None:
        if max_chunk_valid and value > max_chunk:
            note = "" if written else f" (not set: the default is {seconds(value)})"
            r.problems.error(path, f"is too large, maximum is {seconds(max_chunk)}{note}")

    request = r.section("request")
    s = request.section("standard")
    standard = StandardTimeouts(first_byte=s.get("first_byte", positive, d.standard.first_byte),
                                total=s.get("total", positive, d.standard.total))
    s.finish()

    st = request.section("streaming")
    first_byte, first_byte_ok = _given(st, "first_byte", positive, d.streaming.first_byte)
    chunk, chunk_ok = _given(st, "chunk_interval", positive, d.streaming.chunk_interval)
    total, total_ok = _given(st, "total", positive, d.streaming.total)
    st.finish()
    streaming = StreamingTimeouts(first_byte=first_byte, chunk_interval=chunk, total=total)
    chunk_path = child(st.path, "chunk_interval")
    if chunk_path not in r.problems.failed_paths:
        check_chunk(chunk_path, chunk, chunk_ok)
    _warn_past_total(st, {"first_byte": (first_byte, first_byte_ok), "chunk_interval": (chunk, chunk_ok)},
                     (total, total_ok))

    overrides = {}
    for name, raw, path in by_model(request, "model_overrides"):
        overrides[name] = _model_timeouts(Reader(raw, path, r.problems), streaming, check_chunk)
    request.finish()

    out = Timeouts(
        connection=connection, standard=standard, streaming=streaming, model_overrides=overrides,
        max_chunk_interval=max_chunk,
        streaming_fallback_budget_multiplier=r.get("streaming_fallback_budget_multiplier",
                                                   rules.number(1, 10), d.streaming_fallback_budget_multiplier),
    )
    r.finish()
    return out


def _model_timeouts(r: Reader, general: StreamingTimeouts, check_chunk: Any) -> ModelTimeouts:
    positive = rules.duration()
    s = r.section("standard")
    standard_first_byte = s.get("first_byte", positive, None)
    standard_total = s.get("total", positive, None)
    s.finish()
    st = r.section("streaming")
    first_byte, first_byte_ok = _given(st, "first_byte", positive, None)
    chunk, chunk_ok = _given(st, "chunk_interval", positive, None)
    total, total_ok = _given(st, "total", positive, None)
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

    An override is a complete policy: keys it leaves out take the defaults,
    not the values of the top-level ``retry`` section.
    """
    d = RetryPolicy()
    initial, initial_ok = _given(r, "initial_delay", rules.duration(allow_zero=True), d.initial_delay)
    max_delay, max_ok = _given(r, "max_delay", rules.duration(allow_zero=True), d.max_delay)
    out = RetryPolicy(
        max_attempts=r.get("max_attempts", rules.integer(1, 10), d.max_attempts),
        initial_delay=initial,
        max_delay=max_delay,
        backoff_multiplier=r.get("backoff_multiplier", rules.number(1, 10), d.backoff_multiplier),
        jitter=r.get("jitter", rules.boolean, d.jitter),
        retryable_status_codes=r.get("retryable_status_codes", HTTP_ERROR_STATUS, d.retryable_status_codes),
        retryable_errors=r.get("retryable_errors", retryable_error_names, d.retryable_errors),
        timeout=r.get("timeout", rules.duration(), None) if with_timeout else None,
    )
    # Compare only values that are valid; a missing one is the default.
    if (initial_ok or max_ok) and max_delay < initial \
            and not {child(r.path, "initial_delay"), child(r.path, "max_delay")} & r.problems.failed_paths:
        r.problems.error(child(r.path, "max_delay"),
                         f"must be at least initial_delay ({seconds(initial)}), got {seconds(max_delay)}")
    r.finish()
    return out


# --- fallback ----------------------------------------------------------------

def fallback(r: Reader) -> Fallback:
    d = Fallback()
    enabled = r.get("enabled", rules.boolean, d.enabled)
    mid_stream_enabled = r.get("mid_stream_enabled", rules.boolean, d.mid_stream_enabled)
    chains = _chains(r)
    policy = _policy(r.section("fallback_policy"))
    e = r.section("empty_reply_retry")
    empty = EmptyReplyRetry(enabled=e.get("enabled", rules.boolean, d.empty_reply_retry.enabled),
                            max_extra_hops=e.get("max_extra_hops", rules.integer(1, 5),
                                                 d.empty_reply_retry.max_extra_hops))
    e.finish()
    settings = {}
    for name, raw, path in by_model(r, "model_settings"):
        m = Reader(raw, path, r.problems)
        dm = ModelFallbackSettings()
        settings[name] = ModelFallbackSettings(
            fallback_enabled=m.get("fallback_enabled", rules.boolean, dm.fallback_enabled),
            notify_on_fallback=m.get("notify_on_fallback", rules.boolean, dm.notify_on_fallback))
        m.finish()
    r.finish()
    if not enabled and chains:
        r.problems.warn(child(r.path, "fallback_chains"), "chains are ignored while fallback.enabled is false")
    return Fallback(enabled=enabled, mid_stream_enabled=mid_stream_enabled, fallback_chains=chains,
                    fallback_policy=policy, empty_reply_retry=empty, model_settings=settings)


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


def _policy(r: Reader) -> FallbackPolicy:
    d = FallbackPolicy()
    t = r.section("trigger_conditions")
    dt = d.trigger_conditions
    triggers = TriggerConditions(
        error_codes=t.get("error_codes", HTTP_ERROR_STATUS, dt.error_codes),
        timeout=t.get("timeout", rules.boolean, dt.timeout),
        connection_error=t.get("connection_error", rules.boolean, dt.connection_error),
        model_not_found=t.get("model_not_found", rules.boolean, dt.model_not_found),
        backend_unhealthy=t.get("backend_unhealthy", rules.boolean, dt.backend_unhealthy),
        context_window_exceeded=t.get("context_window_exceeded", rules.boolean, dt.context_window_exceeded),
    )
    t.finish()
    out = FallbackPolicy(
        trigger_conditions=triggers,
        max_fallback_attempts=r.get("max_fallback_attempts", rules.integer(0, 10), d.max_fallback_attempts),
        fallback_timeout_multiplier=r.get("fallback_timeout_multiplier", rules.number(1, 10),
                                          d.fallback_timeout_multiplier),
        preserve_parameters=r.get("preserve_parameters", rules.boolean, d.preserve_parameters),
        max_concurrent_dials_per_backend=r.get("max_concurrent_dials_per_backend", rules.integer(0, 10_000),
                                               d.max_concurrent_dials_per_backend),
        content_policy_fallback=r.get("content_policy_fallback", rules.boolean, d.content_policy_fallback),
    )
    r.finish()
    return out


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


# --- streaming ---------------------------------------------------------------

def streaming(r: Reader) -> Streaming:
    m = r.section("mid_stream_fallback")
    d = MidStreamFallback()
    mid = MidStreamFallback(
        enabled=m.get("enabled", rules.boolean, d.enabled),
        min_accumulated_tokens=m.get("min_accumulated_tokens", rules.integer(0, 100_000), d.min_accumulated_tokens),
        max_fallback_attempts=m.get("max_fallback_attempts", rules.integer(0, 10), d.max_fallback_attempts),
        continuation_prompt=m.get("continuation_prompt", continuation_prompt, d.continuation_prompt),
        same_model_first=m.get("same_model_first", rules.boolean, d.same_model_first),
        continuation_style=m.get("continuation_style", rules.one_of({"auto": "auto", "prompt": "prompt"}),
                                 d.continuation_style),
    )
    m.finish()
    r.finish()
    return Streaming(mid_stream_fallback=mid)
