"""The built-in detectors: what looks like personal data or a secret in a piece of text.

Each is a regular expression that finds candidates and, where the shape has
one, a check that throws out look-alikes (Luhn for card numbers, mod 97 for
IBANs, ``ipaddress`` for IPs), so an order number of sixteen digits is not a
card. Pure: no I/O, and nothing here keeps or logs what it found.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Callable, Iterator, Sequence

from attrs import frozen

# Word-ish boundaries that also hold next to Hangul and other scripts: a match must not be glued to
# ASCII letters or digits, but "연락처는 hong@example.com 입니다" still finds the address.
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
                    r"(?![A-Za-z0-9-])")
# International (+CC ...) or national numbers with separators: 9-15 digits in groups; digits alone must
# come with a leading + or 0 (a bare run of digits is more often an id than a phone number).
_PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,4}){1,4}(?!\w)"
                    r"|(?<![\w+])(?:\+|0)\d{8,14}(?!\w)")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Fa-f:])")
_SECRET = re.compile("|".join((
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
    r"\bsk-ant-[A-Za-z0-9_-]{20,}",                        # Anthropic
    r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",  # OpenAI
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",                      # AWS access key id
    r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",                     # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{40,}\b",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",                    # Slack
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",   # JWT
)))


# What a text must hold for a pattern to match at all: a search that stops at the first hit (or a
# substring test) is far cheaper than a pattern that starts with a lookbehind, which the regex engine
# tries at every position. A text without it is not scanned; with it, the pattern decides as before.
_DIGIT = re.compile(r"\d")   # the patterns' own \d: any Unicode decimal digit


def _has_digit(text: str) -> bool:
    return _DIGIT.search(text) is not None


def _may_hold_secret(text: str) -> bool:
    """Each of _SECRET's shapes holds one of these (a GitHub token's prefix ends in "_")."""
    return any(s in text for s in ("-----BEGIN ", "sk-", "AKIA", "ASIA", "_", "xox", "eyJ"))


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(text: str) -> bool:
    digits = re.sub(r"[ -]", "", text)
    return 13 <= len(digits) <= 19 and luhn(digits)


def iban_valid(text: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters to numbers, mod 97 is 1."""
    compact = text.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def _ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _phone(text: str) -> bool:
    digits = sum(ch.isdigit() for ch in text)
    return 9 <= digits <= 15 and not _IPV4.fullmatch(text)


@frozen
class Detector:
    name: str
    patterns: tuple[re.Pattern[str], ...]
    check: Callable[[str], bool] | None = None
    placeholder: str = ""
    needs: Callable[[str], bool] | None = None   # False: the patterns cannot match this text

    def find(self, text: str) -> Iterator[tuple[int, int]]:
        """(start, end) of each match in ``text`` that passes the check."""
        if self.needs is not None and not self.needs(text):
            return
        for pattern in self.patterns:
            for m in pattern.finditer(text):
                if m.end() > m.start() and (self.check is None or self.check(m.group())):
                    yield m.start(), m.end()


BUILT_IN: dict[str, Detector] = {d.name: d for d in (
    Detector("email", (_EMAIL,), placeholder="EMAIL", needs=lambda text: "@" in text),
    Detector("payment_card", (_CARD,), _card, "PAYMENT_CARD", _has_digit),
    Detector("iban", (_IBAN,), iban_valid, "IBAN", _has_digit),
    Detector("ip_address", (_IPV4, _IPV6), _ip, "IP_ADDRESS", lambda text: ":" in text or _has_digit(text)),
    Detector("secret", (_SECRET,), placeholder="SECRET", needs=_may_hold_secret),
    Detector("phone", (_PHONE,), _phone, "PHONE", _has_digit),
)}
# Which detector wins where two find the same characters: the more specific shape first
# (a card number is also a run of digit groups a phone pattern would take).
PRECEDENCE = ("secret", "email", "iban", "payment_card", "ip_address", "phone")


def operator_detector(name: str, pattern: re.Pattern[str]) -> Detector:
    return Detector(name, (pattern,), placeholder=name.upper())


@frozen
class Match:
    """One finding: where it is and which rule found it. The text itself is the caller's to read."""

    start: int
    end: int
    detector: str
    action: str


def scan(text: str, rules: Sequence[tuple[Detector, str]]) -> list[Match]:
    """Every finding of ``rules`` ((detector, action) in precedence order) in ``text``, without overlaps:
    where two overlap, the earlier rule keeps its span. Sorted by position."""
    taken: list[Match] = []
    for detector, action in rules:
        for start, end in detector.find(text):
            if all(end <= m.start or start >= m.end for m in taken):
                taken.append(Match(start, end, detector.name, action))
    return sorted(taken, key=lambda m: m.start)
