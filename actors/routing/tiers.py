"""Which models smart routing may pick from, and the tier each one is in.

A model's tier comes from the first ``model_profiles`` entry naming it
exactly, else the first whose ``model_pattern`` matches; a model no profile
names is unprofiled and, unless ``unprofiled_models: exclude``, keeps an
inferred tier (price, then capabilities, then name) or ``default_tier``.

The pool follows the user-facing model list's visibility: only public
(enabled, not internal) backends count, the virtual model name is never a
candidate, and a model stays only while a public backend serving it is
routable and, for a keyed request, the key allows both the model and such a
backend. Dispatch checks again; this is the pre-filter that keeps policies
from choosing what the request could never reach.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from attrs import frozen

from switchyard.actors.routing.candidates import Discovered, listed_models
from switchyard.config.access import ApiKey
from switchyard.config.metadata import ModelMetadata
from switchyard.config.schema import Snapshot
from switchyard.config.smart_routing import ModelProfile, SmartRouting

MAX_CACHED_TIERS = 10_000

# Inference by price: USD per 1M input tokens, at or above -> tier.
PRICE_TIERS = ((3.0, 1), (0.5, 2))
# Capabilities that mark a capable model; "tools" is the same capability as "tool".
PREMIUM_CAPABILITIES = frozenset({"vision", "reasoning", "audio", "video", "function_calling", "tool"})
FLAGSHIP_WORDS = frozenset({"pro", "ultra", "opus", "sonnet", "turbo"})
LIGHTWEIGHT_WORDS = frozenset({"mini", "small", "tiny", "nano", "lite", "flash", "haiku"})
QUANTIZATION_MARKERS = ("q4_", "q5_", "q8_", "gguf", "gptq", "awq")
# Name words are whole tokens between these, so "pro" is found in "gemini-1.5-pro" but not in "prompt-guard".
NAME_SEPARATORS = re.compile(r"[-_./:@\s]+")


# --- profiles ---------------------------------------------------------------------

def glob_matches(pattern: str, name: str) -> bool:
    """Whole-name, case-sensitive match where ``*`` (any run, several allowed) is the only wildcard.

    ``fnmatch`` would also read ``?`` and ``[...]``, which model names contain and profiles mean literally.
    """
    parts = pattern.split("*")
    if len(parts) == 1:
        return pattern == name
    first, last = parts[0], parts[-1]
    if len(name) < len(first) + len(last) or not name.startswith(first) or not name.endswith(last):
        return False
    at, end = len(first), len(name) - len(last)
    for middle in parts[1:-1]:
        found = name.find(middle, at, end)
        if found < 0:
            return False
        at = found + len(middle)
    return True


def profile_for(model: str, profiles: Iterable[ModelProfile]) -> tuple[ModelProfile | None, str]:
    """The profile that decides ``model``'s tier, and how it matched: an exact name beats any pattern."""
    profiles = tuple(profiles)
    for p in profiles:
        if p.model is not None and p.model == model:
            return p, "explicit_exact"
    for p in profiles:
        if p.model_pattern is not None and glob_matches(p.model_pattern, model):
            return p, "explicit_pattern"
    return None, ""


# --- inference ----------------------------------------------------------------------

def infer_tier(metadata: ModelMetadata | None, model_id: str) -> int | None:
    """An unprofiled model's tier from what is known of it, most reliable evidence first.

    1. Price per 1M input tokens: >= 3 -> 1, >= 0.5 -> 2, else 3. A free (0) or unpriced model
       says nothing about its size, so it goes on to the next step.
    2. Capabilities: three or more of vision, reasoning, audio, video, function_calling, tool
       (``tools`` counts as ``tool``) -> 1; one of them, or three capabilities of any kind -> 2.
    3. Name words (see ``name_tier``). None: nothing to go on (the caller uses ``default_tier``).
    """
    pricing = metadata.pricing if metadata is not None else None
    price = pricing.input_tokens if pricing is not None else None
    if price is not None and price > 0:
        for floor, tier in PRICE_TIERS:
            if price >= floor:
                return tier
        return 3
    caps = metadata.capabilities if metadata is not None else None
    if caps is not None:
        distinct = {"tool" if c == "tools" else c for c in caps}
        premium = len(distinct & PREMIUM_CAPABILITIES)
        if premium >= 3:
            return 1
        if premium >= 1 or len(distinct) >= 3:
            return 2
    return name_tier(model_id)


def name_tier(model_id: str) -> int | None:
    """The tier a model's name suggests, if any.

    Words are matched whole on the lower-cased id split at ``- _ . / : @`` and whitespace;
    quantization markers (which contain a separator themselves) anywhere in it. When a name
    carries both kinds (``gpt-4-turbo-mini``, ``llama-3-70b-pro-gguf``) Lightweight wins: a size
    or quantization marker narrows the family the flagship word names, and a cheaper guess is the
    safer one for a model no one profiled.
    """
    lowered = model_id.lower()
    words = set(NAME_SEPARATORS.split(lowered))
    if words & LIGHTWEIGHT_WORDS or any(marker in lowered for marker in QUANTIZATION_MARKERS):
        return 3
    if words & FLAGSHIP_WORDS:
        return 1
    return None


class TierCache:
    """Inferred tiers by model id (inference failures too), at most ``limit`` ids.

    The owner clears it on every reload and profile change, so an entry never outlives the
    metadata it was inferred from. When full, the oldest entry makes room (insertion order).
    """

    def __init__(self, limit: int = MAX_CACHED_TIERS) -> None:
        self.limit = limit
        self._tiers: dict[str, int | None] = {}

    def __len__(self) -> int:
        return len(self._tiers)

    def __contains__(self, model_id: object) -> bool:
        return model_id in self._tiers

    def tier_of(self, model_id: str, metadata: ModelMetadata | None) -> int | None:
        if model_id in self._tiers:
            return self._tiers[model_id]
        tier = infer_tier(metadata, model_id)
        if len(self._tiers) >= self.limit:
            del self._tiers[next(iter(self._tiers))]
        self._tiers[model_id] = tier
        return tier

    def clear(self) -> None:
        self._tiers.clear()


# --- the candidate pool ----------------------------------------------------------------

@frozen
class Candidate:
    """A model smart routing may choose.

    ``source``: explicit_exact | explicit_pattern | auto_inferred | default. ``domains`` and
    ``cost_in`` (USD per 1K input tokens) come from the profile (empty / None when unprofiled);
    ``capabilities`` from metadata (None: unknown); ``backends`` are the serving public backends
    this request may use now (routable and, with a key, allowed), config order.
    """

    model: str
    tier: int
    source: str
    domains: tuple[str, ...] = ()
    cost_in: float | None = None
    capabilities: tuple[str, ...] | None = None
    backends: tuple[str, ...] = ()


@frozen
class CandidatePool:
    candidates: tuple[Candidate, ...] = ()
    excluded_unprofiled: tuple[str, ...] = ()      # unprofiled_models: exclude
    excluded_incompatible: tuple[str, ...] = ()    # decisions-only output: cannot generate an answer


def generates_text(capabilities: tuple[str, ...] | None) -> bool:
    """False only for a model known to answer with decisions alone (no text or chat)."""
    if capabilities is None or "decisions" not in capabilities:
        return True
    return "text" in capabilities or "chat" in capabilities


def candidate_pool(snapshot: Snapshot, discovered: Discovered, routable: Callable[[str, str], bool],
                   key: ApiKey | None, cache: TierCache, settings: SmartRouting | None = None) -> CandidatePool:
    """The models the policy's tier choice picks from, in model id order.

    ``routable(backend_name, model)``: the backend is healthy and its circuit for the model lets a call through.
    ``settings`` defaults to the snapshot's ``smart_routing``; pass it when profiles were changed
    at run time. Metadata (capabilities, the inputs of inference) is that of the first serving
    public backend in config order, whatever its health, so a model's tier does not move with it.
    """
    settings = settings if settings is not None else snapshot.smart_routing
    candidates: list[Candidate] = []
    unprofiled: list[str] = []
    incompatible: list[str] = []
    for model, serving in listed_models(snapshot.backends, discovered).items():
        if model == settings.virtual_model or (key is not None and not key.allows_model(model)):
            continue
        usable = tuple(b for b in serving if routable(b, model) and (key is None or key.allows_backend(b)))
        if not usable:
            continue
        metadata = snapshot.metadata_for(model, serving[0])
        capabilities = metadata.capabilities if metadata is not None else None
        if not generates_text(capabilities):
            incompatible.append(model)
            continue
        profile, source = profile_for(model, settings.model_profiles)
        if profile is not None:
            candidates.append(Candidate(model, profile.tier, source, profile.domains,
                                        profile.cost_per_1k_input_tokens, capabilities, usable))
        elif settings.unprofiled_models == "exclude":
            unprofiled.append(model)
        else:
            tier = cache.tier_of(model, metadata)
            candidates.append(Candidate(model, settings.default_tier if tier is None else tier,
                                        "default" if tier is None else "auto_inferred",
                                        capabilities=capabilities, backends=usable))
    return CandidatePool(tuple(candidates), tuple(unprofiled), tuple(incompatible))
