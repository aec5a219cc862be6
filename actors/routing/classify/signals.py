"""The eleven signals of the rule classifier and what each is worth.

Signals (``Classification.signals`` names those that fired, in this order):

==================== ====== =============================== =========================
signal               weight complexity ratio                domain (strength)
==================== ====== =============================== =========================
complexity_keywords  0.25   distinct complex keywords       -
                            1/2/3/4+: 0.5/0.6/0.75/0.8;
                            none but a simple marker: 0.0
code_blocks          0.2    0.75                            code (0.9)
inline_code          0.1    0.5                             code (0.6)
math_notation        0.2    1.0                             reasoning (0.8)
code_intent          0.1    0.5                             code (0.75)
creative_markers     0.1    0.3                             creative (1: 0.6, 2+: 0.8)
analysis_markers     0.1    1: 0.5, 2+: 0.6                 analysis (1: 0.45, 2: 0.65,
                                                            3+: 0.8)
translation_intent   0.1    0.3                             multilingual (0.72)
system_prompt        0.1    0.5                             -
tool_definitions     0.1    0.6                             -
multilingual         -      -                               multilingual (0.7), only
                                                            when no intent fired
==================== ====== =============================== =========================

The message length always takes part in the score (weight 0.15; estimated
tokens below 50: 0.25, below 200: 0.4, up to 500: 0.6, above: 0.9) but is
not reported as a signal: it says nothing by firing.

The score is the weighted average over the terms that fired, so a term whose
ratio is below the current average pulls it down: a system prompt or tool
definitions lower an otherwise maxed score. That is what caps short requests
below expert (see ``rule.py``).

The first seven after ``complexity_keywords`` are intent signals; the
strongest fired one names the domain, ties going to the earlier in
``DOMAIN_ORDER``. ``multilingual`` is an observation of script, not an
intent, and names the domain only when no intent fired.
"""

from __future__ import annotations

from switchyard.config.smart_routing import RULE_MAX_CONFIDENCE

SIGNALS = (
    "complexity_keywords", "code_blocks", "inline_code", "math_notation", "code_intent", "creative_markers",
    "analysis_markers", "translation_intent", "system_prompt", "tool_definitions", "multilingual",
)
INTENT_SIGNALS = frozenset({"code_blocks", "inline_code", "math_notation", "code_intent", "creative_markers",
                            "analysis_markers", "translation_intent"})
CODE_SIGNALS = frozenset({"code_blocks", "inline_code", "code_intent"})

LENGTH_WEIGHT = 0.15
WEIGHTS = {
    "complexity_keywords": 0.25, "code_blocks": 0.2, "math_notation": 0.2, "inline_code": 0.1, "code_intent": 0.1,
    "creative_markers": 0.1, "analysis_markers": 0.1, "translation_intent": 0.1, "system_prompt": 0.1,
    "tool_definitions": 0.1,
}
FIXED_RATIOS = {
    "code_blocks": 0.75, "math_notation": 1.0, "inline_code": 0.5, "code_intent": 0.5, "creative_markers": 0.3,
    "translation_intent": 0.3, "system_prompt": 0.5, "tool_definitions": 0.6,
}
COMPLEX_KEYWORD_RATIOS = (0.5, 0.6, 0.75, 0.8)      # 1, 2, 3, 4+ distinct complex keywords
SIMPLE_RATIO = 0.0                                  # only simple markers (greetings, "what is", thanks)
ANALYSIS_RATIOS = (0.5, 0.6)                        # 1, 2+ analysis markers

DOMAIN_ORDER = ("code_blocks", "math_notation", "code_intent", "translation_intent", "creative_markers",
                "analysis_markers", "inline_code")
DOMAIN_OF = {"code_blocks": "code", "math_notation": "reasoning", "code_intent": "code",
             "translation_intent": "multilingual", "creative_markers": "creative", "analysis_markers": "analysis",
             "inline_code": "code"}
FIXED_STRENGTHS = {"code_blocks": 0.9, "math_notation": 0.8, "code_intent": 0.75, "translation_intent": 0.72,
                   "inline_code": 0.6}
CREATIVE_STRENGTHS = (0.6, 0.8)                     # 1, 2+ markers
ANALYSIS_STRENGTHS = (0.45, 0.65, 0.8)              # 1, 2, 3+ markers
SCRIPT_STRENGTH = 0.7
SCRIPT_SHARE = 0.3                                  # non-Latin share of the letters that fires multilingual

BASE_CONFIDENCE = 0.55
INTENT_CONFIDENCE = 0.15
OTHER_CONFIDENCE = 0.05
CONFLICT_PENALTY = 0.2
MIN_CONFIDENCE = 0.05
MAX_CONFIDENCE = RULE_MAX_CONFIDENCE


def _step(table: tuple[float, ...], count: int) -> float:
    return table[min(count, len(table)) - 1]


def length_ratio(tokens: int) -> float:
    if tokens < 50:
        return 0.25
    if tokens < 200:
        return 0.4
    if tokens <= 500:
        return 0.6
    return 0.9


def ratio(signal: str, count: int) -> float:
    """The complexity ratio of a fired signal; ``count`` is its distinct markers (0 for simple-only keywords)."""
    if signal == "complexity_keywords":
        return _step(COMPLEX_KEYWORD_RATIOS, count) if count else SIMPLE_RATIO
    if signal == "analysis_markers":
        return _step(ANALYSIS_RATIOS, count)
    return FIXED_RATIOS[signal]


def score(tokens: int, fired: dict[str, int]) -> float:
    """Weighted average of the ratios of the terms that fired (message length always does)."""
    total = LENGTH_WEIGHT * length_ratio(tokens)
    weights = LENGTH_WEIGHT
    for signal, count in fired.items():
        if signal in WEIGHTS:
            total += WEIGHTS[signal] * ratio(signal, count)
            weights += WEIGHTS[signal]
    return total / weights


def strength(signal: str, count: int) -> float:
    if signal == "creative_markers":
        return _step(CREATIVE_STRENGTHS, count)
    if signal == "analysis_markers":
        return _step(ANALYSIS_STRENGTHS, count)
    return FIXED_STRENGTHS[signal]


def domain(fired: dict[str, int]) -> str:
    intents = [s for s in DOMAIN_ORDER if s in fired]
    if intents:
        best = max(intents, key=lambda s: (strength(s, fired[s]), -DOMAIN_ORDER.index(s)))
        return DOMAIN_OF[best]
    return "multilingual" if "multilingual" in fired else "general"


def confidence(fired: dict[str, int]) -> float:
    """A count of signals, not a probability: more fired signals, more confidence; creative with code, less."""
    intents = sum(1 for s in fired if s in INTENT_SIGNALS)
    others = len(fired) - intents
    value = min(MAX_CONFIDENCE, BASE_CONFIDENCE + INTENT_CONFIDENCE * intents + OTHER_CONFIDENCE * others)
    if "creative_markers" in fired and CODE_SIGNALS & fired.keys():
        value -= CONFLICT_PENALTY
    return round(max(MIN_CONFIDENCE, value), 4)
