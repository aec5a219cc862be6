"""Keyword matching: which entries of a keyword table a text contains.

Matching is case-insensitive and follows these rules:

- a one-word entry matches as a substring ("요약" in "요약해줘", "poem" in
  "poems"), so a stem stands for its word family;
- a multi-word entry matches its words in order within one sentence, with at
  most ``MAX_GAP`` tokens between adjacent words ("write a story" in "write a
  short story"). ``.``, ``!``, ``?`` (ASCII or full width, a ``.`` only when
  whitespace or the end follows, so "node.js" and "v1.2" stay whole), ``。``
  and a newline close a sentence;
- tokens are split on whitespace with punctuation at their ends stripped, and
  each word must equal a whole token, except that the last word may run on
  within its token when it ends in a non-Latin letter ("써" matches "써줘").
  Earlier words never run on, so "시 한 편" does not match "시스템 한 편",
  and Latin words never do;
- an entry whose first and last words are both Latin function words (a, the,
  is, what, once, upon, ...) matches only as adjacent words: "once upon" is
  not in "Once agreed upon, ...", "what is" not in "What throughput is
  achievable here". Only the outer words count, so "write a story" gaps.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from attrs import frozen

from switchyard.actors.routing.classify.keyword_tables import BASE_LANGUAGE, BUILTIN, FUNCTION_WORDS
from switchyard.actors.routing.classify.language import LATIN_LETTER
from switchyard.config.smart_routing import KEYWORD_CATEGORIES

MAX_GAP = 2
# Keywords and script are looked for in the head and tail of a long text only: that is where a prompt
# wrapped around a pasted document says what it wants, and it keeps a megabyte request cheap to classify.
HEAD_CHARS = 16_000
TAIL_CHARS = 4_000
SENTENCE_END = re.compile(r"[!?\n\u3002\uff01\uff1f]|\.(?=\s|$)")
PUNCTUATION = string.punctuation + "\u201c\u201d\u2018\u2019\u00ab\u00bb\u300c\u300d\u300e\u300f\u3010\u3011" \
    "\uff08\uff09\u300a\u300b\u3008\u3009\u3001\uff0c\uff1a\uff1b\u2026\u00b7\u2014\u2013"


def head_and_tail(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """A long text's first ``head`` and last ``tail`` characters, a line break between."""
    if len(text) <= head + tail:
        return text
    return text[:head] + "\n" + text[-tail:]


class Scanned:
    """A text prepared once for every table: lower case, and its sentences as tokens.

    Of a text longer than ``HEAD_CHARS + TAIL_CHARS`` only the head and the
    tail are kept, with a sentence break between them.
    """

    __slots__ = ("index", "sentences", "text")

    def __init__(self, text: str) -> None:
        self.text = head_and_tail(text).lower()
        sentences: list[tuple[str, ...]] = []
        index: dict[str, list[tuple[int, int]]] = {}
        for sentence in SENTENCE_END.split(self.text):
            tokens = tuple(t for t in (w.strip(PUNCTUATION) for w in sentence.split()) if t)
            if not tokens:
                continue
            for pos, token in enumerate(tokens):
                index.setdefault(token, []).append((len(sentences), pos))
            sentences.append(tokens)
        self.sentences = tuple(sentences)
        self.index = index


def _words(entry: str) -> tuple[str, ...]:
    return tuple(w for w in (w.strip(PUNCTUATION) for w in entry.lower().split()) if w)


@frozen
class Phrase:
    """A multi-word entry."""

    entry: str
    words: tuple[str, ...]

    @property
    def adjacent(self) -> bool:
        return self.words[0] in FUNCTION_WORDS and self.words[-1] in FUNCTION_WORDS

    @property
    def open_end(self) -> bool:
        last = self.words[-1][-1]
        return last.isalpha() and not LATIN_LETTER.match(last)

    def found_in(self, scanned: Scanned) -> bool:
        if not all(w in scanned.text for w in self.words):
            return False
        gap = 0 if self.adjacent else MAX_GAP
        open_end = self.open_end
        for sentence, pos in scanned.index.get(self.words[0], ()):
            if self._rest(scanned.sentences[sentence], pos, 1, gap, open_end):
                return True
        return False

    def _rest(self, tokens: tuple[str, ...], pos: int, k: int, gap: int, open_end: bool) -> bool:
        if k == len(self.words):
            return True
        word = self.words[k]
        last = k == len(self.words) - 1
        for j in range(pos + 1, min(len(tokens), pos + 2 + gap)):
            token = tokens[j]
            if (token == word or (last and open_end and token.startswith(word))) \
                    and self._rest(tokens, j, k + 1, gap, open_end):
                return True
        return False


@frozen
class KeywordSet:
    """One category of one table, split into substring entries and phrases."""

    singles: tuple[str, ...]
    phrases: tuple[Phrase, ...]

    @classmethod
    def of(cls, entries: Iterable[str]) -> KeywordSet:
        singles: list[str] = []
        phrases: list[Phrase] = []
        for entry in dict.fromkeys(e.strip().lower() for e in entries):
            words = _words(entry)
            if len(words) > 1:
                phrases.append(Phrase(entry, words))
            elif entry:
                singles.append(entry)
        return cls(tuple(singles), tuple(phrases))

    def matches(self, scanned: Scanned) -> frozenset[str]:
        """The distinct entries found."""
        found = {s for s in self.singles if s in scanned.text}
        found.update(p.entry for p in self.phrases if p.found_in(scanned))
        return frozenset(found)


Table = Mapping[str, KeywordSet]          # category -> entries


def build_tables(extra: Mapping[str, Mapping[str, tuple[str, ...]]]) -> Mapping[str, Table]:
    """language -> table: English (built-in and configured) under the language's own entries.

    A language with neither built-in nor configured entries has no table of
    its own; ``table_for`` gives it English.
    """
    languages = dict.fromkeys([*BUILTIN, *extra])
    base = (BUILTIN[BASE_LANGUAGE], extra.get(BASE_LANGUAGE, {}))
    tables = {}
    for language in languages:
        layers = base if language == BASE_LANGUAGE else (*base, BUILTIN.get(language, {}),
                                                          extra.get(language, {}))
        tables[language] = MappingProxyType({
            category: KeywordSet.of(e for layer in layers for e in layer.get(category, ()))
            for category in KEYWORD_CATEGORIES})
    return MappingProxyType(tables)


def table_for(tables: Mapping[str, Table], detected: str | None, primary: str | None) -> Table:
    """The table a request's keywords are matched against.

    Detection tells ko, ja and zh apart by itself, and those are never
    overridden. Latin text (and text in a script detection does not name, or
    with no letters) uses ``primary_language``'s table when that is not one of
    them: detection reports all Latin text as ``en``, so ``fr`` entries apply
    only with ``primary_language: fr``. A language without a table uses
    English.
    """
    language = detected
    if detected not in ("ko", "ja", "zh") and primary and primary not in ("ko", "ja", "zh"):
        language = primary
    return tables.get(language or BASE_LANGUAGE, tables[BASE_LANGUAGE])
