"""The rule classifier: complexity, domain, needs and language of a chat request, from its text alone.

It runs on every ``model: "auto"`` request, so it is pure and cheap: the
keyword tables are compiled once per settings, and a request is read once.

What is read (``turn.py``): the system and developer messages plus the last
user message are scored; capabilities come from the whole request; the
language from the last user message (earlier user turns only when it has no
letters). Code fences are taken out before keywords, language, script and
math are looked for, so words inside code neither count as markers nor hide a
Korean question behind an English listing. Of a text longer than 20,000
characters keywords, language and script are read in the first 16,000 and
the last 4,000 (``keywords.head_and_tail``); markup in the first 200,000 and last
50,000; length in all of it.

Complexity: the weighted average of the fired terms (``signals.py``), cut
at 0.15 / 0.35 / 0.55 / 0.75 (``level_of``). An average cannot exceed its
strongest term, and most terms stop below 0.75, so short requests are capped:

- below 200 estimated tokens without math notation: at most
  (0.4*0.15 + 0.8*0.25 + 0.75*0.2) / 0.6 = 0.683 (complex);
- below 50 tokens, every term at its best including math: 0.734;
- 50 to 199 tokens with math and four distinct complex keywords:
  (0.4*0.15 + 0.8*0.25 + 1.0*0.2) / 0.6 = 0.767, expert (0.7625 with a
  fenced block; at most 0.747 with three keywords); inline code or code
  intent adds a 0.5 term that pulls it back below 0.75;
- without math, expert only above 500 tokens.

The formal-proof floor (``proof.py``) makes a request for a proof of a
formula expert regardless of the score.

Domain: the strongest fired intent signal, else ``multilingual`` when the
script signal fired (at least 30% of the scored letters are not Latin, and
the detected language is not ``primary_language``), else ``general``.
``code_intent`` needs two distinct ``code`` entries and no fenced block or
inline code.

Confidence: min(0.95, 0.55 + 0.15 per fired intent signal + 0.05 per other
fired signal), less 0.2 when creative markers fire with a code signal,
floored at 0.05, rounded to four places. A short translation request thus
reaches the default hybrid threshold (0.7); a request without signals is 0.55.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switchyard.actors.routing.classification import Classification, level_of
from switchyard.actors.routing.classify import proof, signals
from switchyard.actors.routing.classify.keywords import Scanned, Table, build_tables, head_and_tail, table_for
from switchyard.actors.routing.classify.language import detect_language, estimated_tokens, latin_count, letter_count
from switchyard.actors.routing.classify.markup import has_fence, has_inline_code, has_math, without_fences
from switchyard.actors.routing.classify.turn import Turn, turn_of
from switchyard.config.smart_routing import RuleSettings

DEFAULT_SETTINGS = RuleSettings()
MARKUP_HEAD, MARKUP_TAIL = 200_000, 50_000   # characters of each message searched for code and math markup
SCORE_PLACES = 6           # rounding before the level cut, so float noise never crosses a boundary


def _language(turn: Turn) -> str | None:
    for text in (turn.last_user, "\n".join(turn.earlier_users)):
        text = head_and_tail(text)
        found = detect_language(without_fences(text)) or detect_language(text)
        if found:
            return found
    return None


class RuleClassifier:
    """Classifies by keywords, markup and script; one instance per rule settings."""

    def __init__(self, settings: RuleSettings = DEFAULT_SETTINGS) -> None:
        self.settings = settings
        self._tables = build_tables(settings.keywords)

    def classify(self, payload: Mapping[str, Any]) -> Classification:
        turn = turn_of(payload if isinstance(payload, Mapping) else {})
        language = _language(turn)
        table = table_for(self._tables, language, self.settings.primary_language)
        fired = self._fired(turn, table, language)
        scored = turn.scored
        value = round(signals.score(estimated_tokens(scored), fired), SCORE_PLACES)
        complexity = level_of(value)
        last = head_and_tail(turn.last_user, MARKUP_HEAD, MARKUP_TAIL)
        if complexity != "expert" and proof.asks_for_proof(last, table["proof"]):
            complexity = "expert"
        needs = frozenset(n for n, on in (("vision", turn.vision), ("tools", turn.tools)) if on)
        return Classification(
            complexity=complexity,
            domain=signals.domain(fired),
            confidence=signals.confidence(fired),
            required_capabilities=needs,
            language=language,
            score=value,
            source="rule",
            signals=tuple(s for s in signals.SIGNALS if s in fired),
        )

    def _fired(self, turn: Turn, table: Table, language: str | None) -> dict[str, int]:
        """Signal -> its count of distinct markers (1 for signals that only fire)."""
        # Markup is looked for in at most the first 200,000 and last 50,000 characters of each
        # message, so a 10 MB body costs tens of milliseconds on the event loop, not seconds.
        texts = tuple(head_and_tail(t, MARKUP_HEAD, MARKUP_TAIL) for t in (*turn.instructions, turn.last_user))
        fenced = any(has_fence(t) for t in texts)
        prose = "\n".join(without_fences(t) for t in texts)
        inline = has_inline_code(prose)
        scanned = Scanned(prose)
        fired: dict[str, int] = {}
        complex_keywords = table["complex"].matches(scanned)
        if complex_keywords:
            fired["complexity_keywords"] = len(complex_keywords)
        elif table["simple"].matches(scanned):
            fired["complexity_keywords"] = 0
        if fenced:
            fired["code_blocks"] = 1
        if inline:
            fired["inline_code"] = 1
        if has_math(prose):
            fired["math_notation"] = 1
        if not fenced and not inline:
            code = table["code"].matches(scanned)
            if len(code) >= 2:
                fired["code_intent"] = len(code)
        for signal, category in (("creative_markers", "creative"), ("analysis_markers", "analysis"),
                                 ("translation_intent", "translation")):
            found = table[category].matches(scanned)
            if found:
                fired[signal] = len(found)
        if turn.instructions:
            fired["system_prompt"] = 1
        if turn.tools:
            fired["tool_definitions"] = 1
        if self._script_signal(prose, language):
            fired["multilingual"] = 1
        return fired

    def _script_signal(self, prose: str, language: str | None) -> bool:
        primary = self.settings.primary_language
        if primary is not None and language == primary:
            return False
        sample = head_and_tail(prose)
        letters = letter_count(sample)
        return bool(letters) and letters - latin_count(sample) >= signals.SCRIPT_SHARE * letters
