"""What a classifier says about a request; the common currency of the rule and LLM classifiers."""

from __future__ import annotations

from attrs import frozen

# Complexity score boundaries (rule classifier): below 0.15 trivial, below 0.35 simple,
# below 0.55 moderate, below 0.75 complex, else expert.
BOUNDARIES = (0.15, 0.35, 0.55, 0.75)


@frozen
class Classification:
    complexity: str                              # a complexity level (built-in or custom)
    domain: str                                  # the primary domain tag
    confidence: float                            # 0..1; for the rule classifier a count of signals, not a probability
    required_capabilities: frozenset[str] = frozenset()   # "vision", "tools": always from the rule classifier
    # Detected in the last user message (ko, ja, zh, en, und); None when it has no letters at all.
    language: str | None = None
    score: float | None = None                   # the rule classifier's complexity score
    source: str = "rule"                         # rule | llm | cache (an LLM answer served from the cache)
    signals: tuple[str, ...] = ()                # the rule signals that fired, for simulate and debugging


def level_of(score: float) -> str:
    """The built-in complexity level of a rule score."""
    for level, bound in zip(("trivial", "simple", "moderate", "complex"), BOUNDARIES, strict=True):
        if score < bound:
            return level
    return "expert"
