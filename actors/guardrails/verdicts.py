"""One guardrail's built-in detectors over a list of texts: the verdict, and the texts as enforced.

A verdict names the guardrail, the stage, the mode, what it did (``mask``,
``block``, ``log``; for a webhook also ``allow``, ``rewrite``; for a
moderation model ``allow``), how many findings each detector had and the
categories a moderation model flagged: never what was found. Masking
gives each distinct value a numbered placeholder (``<EMAIL_1>``) that the
same value keeps everywhere in the call, the system prompt and the answer
included. Pure: no I/O.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any, Mapping, Sequence

import attrs
from attrs import frozen

from switchyard.actors.errors import ClientError, Unavailable
from switchyard.actors.guardrails.detectors import BUILT_IN, PRECEDENCE, Detector, operator_detector, scan
from switchyard.actors.guardrails.texts import Slot
from switchyard.actors.routing.tally import Tally
from switchyard.config.guardrails import Guardrail

SEVERITY = {"log": 0, "mask": 1, "block": 2}


class GuardrailBlocked(ClientError):
    """A guardrail in enforce mode refused the call (or its answer); the message never holds the match."""

    code = "guardrail_blocked"


class GuardrailUnavailable(Unavailable):
    """A webhook or moderation guardrail with ``on_failure: fail_closed`` gave no usable verdict."""

    code = "guardrail_unavailable"


@frozen
class Verdict:
    guardrail: str
    stage: str
    mode: str
    action: str
    detectors: Mapping[str, int] = attrs.field(factory=dict)
    # why no verdict came: a webhook's timeout, status, malformed, connect; a moderation model's timeout,
    # error, malformed
    failure: str | None = None
    categories: tuple[str, ...] = ()   # a moderation model's flagged categories (those that count)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"guardrail": self.guardrail, "stage": self.stage, "mode": self.mode,
                               "action": self.action}
        if self.detectors:
            out["detectors"] = dict(self.detectors)
        if self.categories:
            out["categories"] = list(self.categories)
        if self.failure is not None:
            out["failure"] = self.failure
        return out


class GuardrailVerdicts(Tally[tuple[str, str, str, str]]):
    """Every verdict, by (guardrail, stage, action, mode), for guardrail_verdicts_total."""

    def verdict(self, v: Verdict) -> None:
        self.add((v.guardrail, v.stage, v.action, v.mode))


def verdicts_json(verdicts: Sequence[Verdict]) -> str | None:
    """The ledger's ``guardrails`` field: the verdicts as compact JSON; None when there were none."""
    if not verdicts:
        return None
    return json.dumps([v.as_dict() for v in verdicts], separators=(",", ":"))


def in_scope(g: Guardrail, key_id: str | None, model: str) -> bool:
    if g.keys and key_id not in g.keys:
        return False
    return not g.models or any(fnmatchcase(model, glob) for glob in g.models)


class Masker:
    """The call's placeholders: one per distinct (kind, value), numbered by first sight."""

    def __init__(self) -> None:
        self._given: dict[tuple[str, str], str] = {}
        self._next: dict[str, int] = {}

    def placeholder(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self._given:
            n = self._next.get(kind, 0) + 1
            self._next[kind] = n
            self._given[key] = f"<{kind}_{n}>"
        return self._given[key]


@lru_cache(maxsize=256)
def rules_of(g: Guardrail) -> tuple[tuple[Detector, str], ...]:
    """The guardrail's detectors in precedence order (built-ins, then the operator's patterns)."""
    chosen = dict(g.detectors)
    out = [(BUILT_IN[name], chosen[name]) for name in PRECEDENCE if name in chosen]
    out.extend((operator_detector(p.name, p.compiled), p.action) for p in g.patterns if p.compiled is not None)
    return tuple(out)


@frozen
class Outcome:
    verdict: Verdict | None          # None: nothing found
    texts: tuple[str, ...]           # as enforced (unchanged unless masked in enforce mode)
    blocked_by: str | None = None    # the first detector whose action is block
    unmaskable: str | None = None    # a detector whose mask would break a tool call's JSON arguments


def judge(g: Guardrail, stage: str, slots: Sequence[Slot], masker: Masker) -> Outcome:
    """Run ``g``'s detectors over ``slots``; in enforce mode mask what is to be masked."""
    counts: dict[str, int] = {}
    worst, blocked_by, unmaskable = "log", None, None
    texts = []
    rules = rules_of(g)
    kinds = {d.name: d.placeholder for d, _ in rules}
    for slot in slots:
        found = scan(slot.text, rules)
        if not found:
            texts.append(slot.text)
            continue
        text, cursor, pieces = slot.text, 0, []
        for m in found:
            counts[m.detector] = counts.get(m.detector, 0) + 1
            if SEVERITY[m.action] > SEVERITY[worst]:
                worst = m.action
            if m.action == "block" and blocked_by is None:
                blocked_by = m.detector
            if m.action == "mask":
                pieces.append(text[cursor:m.start])
                pieces.append(masker.placeholder(kinds[m.detector], text[m.start:m.end]))
                cursor = m.end
        pieces.append(text[cursor:])
        masked = "".join(pieces)
        if slot.arguments and masked != text and not _still_json(text, masked):
            unmaskable = unmaskable or next(m.detector for m in found if m.action == "mask")
        texts.append(masked)
    if not counts:
        return Outcome(None, tuple(s.text for s in slots))
    verdict = Verdict(g.name, stage, g.mode, worst, counts)
    if g.mode != "enforce" or worst == "log":
        return Outcome(verdict, tuple(s.text for s in slots))
    return Outcome(verdict, tuple(texts), blocked_by, unmaskable)


def _still_json(before: str, after: str) -> bool:
    """Whether a masked tool-call argument string is still the JSON it was (when it was JSON; text nested
    past what the parser takes counts as not JSON)."""
    try:
        json.loads(before)
    except (ValueError, RecursionError):
        return True
    try:
        json.loads(after)
    except (ValueError, RecursionError):
        return False
    return True


def blocked(g: Guardrail, stage: str, detector: str) -> GuardrailBlocked:
    where = "the request" if stage == "input" else "the answer"
    return GuardrailBlocked(f"Guardrail '{g.name}' blocked {where}: detector '{detector}' matched",
                            details={"guardrail": g.name, "stage": stage, "detector": detector})


def unmaskable(g: Guardrail, stage: str, detector: str) -> GuardrailBlocked:
    return GuardrailBlocked(f"Guardrail '{g.name}' cannot mask what detector '{detector}' matched in place "
                            f"(a tool call's arguments would no longer be JSON), so the request is refused",
                            details={"guardrail": g.name, "stage": stage, "detector": detector,
                                     "reason": "cannot_mask"})
