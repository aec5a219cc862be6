"""Model variant suffixes: ``base:nitro``, ``base:floor``, ``base:thinking``, ``base:online``.

Opt-in (``proxy.variant_suffixes.enabled``), and only on ``/v1/chat/completions``.
A requested name is resolved as itself first: a name some backend serves or
declares (``x:nitro`` served literally, an Ollama ``name:tag``) is never split.
Only when the full name is unknown, and it ends in one of the four known words
after its last ``:``, and the part before is known, is it read as a variant.
Any other trailing word (``:free``, ``:cheap``, an Ollama tag of an unknown
model) leaves the name whole, so it fails as the unknown model it is.

``:nitro`` and ``:floor`` only narrow the candidates that health (and, later,
the admission gate) already left: the highest recent throughput, or the lowest
comparable price. With no data for any candidate the set is left as it is and
the preference is reported as not applied.

Pure: no clock, no I/O, no trio. Time comes in as an argument.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, TypeVar

from attrs import frozen

from switchyard.actors.routing.tally import Tally

NITRO, FLOOR, THINKING, ONLINE = "nitro", "floor", "thinking", "online"
VARIANTS = (NITRO, FLOOR, THINKING, ONLINE)
RANKED = frozenset({NITRO, FLOOR})     # preferences over candidates; the others change the request

# What ``:thinking`` asks for when the client set no reasoning effort of its own.
THINKING_EFFORT = "high"

T = TypeVar("T")



class VariantRequests(Tally[tuple[str, bool]]):
    """Chat calls naming a variant suffix, by (variant, whether it was applied), counted when the call ends:
    continuum_model_variant_requests_total."""

@frozen
class Variant:
    """A requested name read as ``base`` plus a variant word."""

    requested: str
    base: str
    variant: str


def parse(requested: str, known: Callable[[str], bool]) -> Variant | None:
    """``requested`` as a variant, or None to route it as the name it is.

    ``known(name)`` says whether the router resolves ``name`` on its own
    (served, declared, an alias, a catalogue entry). The full name is asked
    first; a trailing word other than the four variants is never split off.
    """
    base, sep, word = requested.rpartition(":")
    if not sep or not base or word not in VARIANTS:
        return None
    if known(requested):
        return None          # a name literally served wins over the suffix reading
    if not known(base):
        return None          # an unknown base: the whole name stays the unknown model
    return Variant(requested, base, word)


# --- the engine-stats view :nitro reads ----------------------------------------------------

@frozen
class ThroughputSample:
    """A backend's recent decode throughput and when it was observed (the trio clock)."""

    tokens_per_second: float
    observed_at: float


class ThroughputView(Protocol):
    """Backend name -> its latest throughput sample; a plain dict is one.

    Published by the engine-stats poller (a later issue); until then the
    runtime holds an empty view, so ``:nitro`` always falls back.
    """

    def get(self, backend: str, /) -> ThroughputSample | None: ...


def fresh_throughput(view: ThroughputView, backend: str, now: float, max_age: float) -> float | None:
    sample = view.get(backend)
    if sample is None or now - sample.observed_at > max_age or sample.tokens_per_second <= 0:
        return None
    return sample.tokens_per_second


# --- narrowing -------------------------------------------------------------------------

def narrow(candidates: Sequence[T], score: Callable[[T], float | None], best: str) -> list[T] | None:
    """The candidates with the best score (``best`` is "max" or "min"); None when none has one.

    Never adds a candidate and keeps their order, so the configured strategy
    still chooses among ties.
    """
    scored = [(c, s) for c in candidates if (s := score(c)) is not None]
    if not scored:
        return None
    target = max(s for _, s in scored) if best == "max" else min(s for _, s in scored)
    return [c for c, s in scored if s == target]


def price_per_million(input_tokens: float | None, output_tokens: float | None) -> float | None:
    """The ``:floor`` price: input + output USD per 1M tokens; None unless both are known."""
    if input_tokens is None or output_tokens is None:
        return None
    return input_tokens + output_tokens


def with_effort(payload: dict[str, Any], effort: str = THINKING_EFFORT) -> dict[str, Any]:
    """The payload ``:thinking`` sends: the client's own ``reasoning_effort`` wins."""
    if payload.get("reasoning_effort") is not None:
        return payload
    return {**payload, "reasoning_effort": effort}

