"""Which language a message is in, and how long it is, judged by script alone.

Detection looks only at letters (Unicode category L*) and decides in this order:

1. no letters at all: ``None``;
2. Hangul at least 1/10 of the letters: ``ko`` (a Korean request that quotes
   English technical terms is still Korean);
3. kana at least 1/10 of the letters: ``ja``;
4. Han and kana together at least 1/10 of the letters: ``zh`` when there is
   no kana at all, ``ja`` when there is some;
5. Latin letters at least half of the letters: ``en``;
6. otherwise (Cyrillic, Arabic, Thai, ...): ``und``.

Han needs its tenth like Hangul and kana do: a Chinese request quoting
English terms has more Latin letters than Han characters, yet is Chinese,
while one Han character in an English sentence leaves it English.

Length is weighted so that a Korean request and its English translation come
out about the same size: a Hangul syllable or a Han character counts 2.5
characters, everything else 1. Four weighted characters make a token.
"""

from __future__ import annotations

import math
import re

HANGUL = "\u1100-\u11ff\u3131-\u318e\ua960-\ua97c\uac00-\ud7a3\ud7b0-\ud7fb"
KANA = "\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9d"
HAN = "\u3005\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
LATIN = ("A-Za-z\u00aa\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02af\u1e00-\u1eff"
         "\u2c60-\u2c7f\ua722-\ua7ff\uab30-\uab5a\uff21-\uff3a\uff41-\uff5a")
# Hangul syllables and Han characters: each weighs WIDE_WEIGHT characters.
WIDE = "\uac00-\ud7a3\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
# Runs, not single characters: counting by run length is several times faster on long texts.
HANGUL_RUNS, KANA_RUNS, HAN_RUNS, LATIN_RUNS, WIDE_RUNS = (
    re.compile(f"[{chars}]+") for chars in (HANGUL, KANA, HAN, LATIN, WIDE))
LATIN_LETTER = re.compile(f"[{LATIN}]")
WIDE_WEIGHT = 2.5
CHARS_PER_TOKEN = 4
SCRIPT_SHARE = 0.1          # Hangul or kana this share of the letters decides the language


def _count(runs: re.Pattern[str], text: str) -> int:
    return sum(map(len, runs.findall(text)))


def letter_count(text: str) -> int:
    return sum(map(str.isalpha, text))


def latin_count(text: str) -> int:
    return _count(LATIN_RUNS, text)


def detect_language(text: str) -> str | None:
    """``ko``, ``ja``, ``zh``, ``en`` or ``und`` by script (see the module docstring); None without letters."""
    letters = letter_count(text)
    if not letters:
        return None
    hangul = _count(HANGUL_RUNS, text)
    if hangul >= SCRIPT_SHARE * letters:
        return "ko"
    kana = _count(KANA_RUNS, text)
    if kana >= SCRIPT_SHARE * letters:
        return "ja"
    if _count(HAN_RUNS, text) + kana >= SCRIPT_SHARE * letters:
        return "ja" if kana else "zh"
    return "en" if 2 * latin_count(text) >= letters else "und"


def weighted_length(text: str) -> float:
    """Characters, with Hangul syllables and Han characters counting 2.5 each."""
    if text.isascii():
        return float(len(text))
    return len(text) + (WIDE_WEIGHT - 1) * _count(WIDE_RUNS, text)


def estimated_tokens(text: str) -> int:
    return math.ceil(weighted_length(text) / CHARS_PER_TOKEN)
