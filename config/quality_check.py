"""``fallback.quality_check``: which answers are judged before the client trusts them, and by which checks.

An answer that arrives whole and well formed can still be useless: text that
is not the JSON the request's schema asks for, a tool call whose arguments
do not fit the tool, nothing at all, or a refusal. For the chains' primary
models named in ``models``, such an answer counts as a failed attempt and the
call moves to the chain's next model (docs/quality-checks.md). The checks
themselves are ``actors/routing/quality.py``; the patterns are compiled here,
so a bad one is a load error naming its index, never a failed call.

``models`` follows the fallback chains' naming rule, which lives with the
chains' loader (``load_resilience.chain_model_name``): that loader reads it
and hands it to ``load_section``.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
from attrs import frozen

from switchyard.config import rules
from switchyard.config.fields import field
from switchyard.config.guardrails import regex
from switchyard.config.rules import Invalid

JSON_SCHEMA, TOOL_ARGUMENTS, EMPTY, REFUSAL = "json_schema", "tool_arguments", "empty", "refusal"
CHECKS = (JSON_SCHEMA, TOOL_ARGUMENTS, EMPTY, REFUSAL)   # the order they are judged in: docs/quality-checks.md


def _checks(value: Any) -> frozenset[str]:
    """A non-empty list of check names (an empty one would turn the checks off for the listed models)."""
    names = rules.list_of(rules.one_of({c: c for c in CHECKS}), "check names")(value)
    if not names:
        raise Invalid(f"must name at least one check of {', '.join(CHECKS)}")
    return frozenset(names)


@frozen
class QualityCheck:
    # the chains' primary models whose calls are judged (the model a call is routed as): read by hand
    models: tuple[str, ...] = ()
    checks: frozenset[str] = field(frozenset(CHECKS), _checks)
    # Python regular expressions searched in the answer's text (use (?i) to ignore case)
    refusal_patterns: tuple[str, ...] = field((), rules.list_of(regex, "regular expressions"))
    compiled: tuple[re.Pattern[str], ...] = attrs.field(init=False, repr=False, eq=False,
                                                        metadata={"internal": True})

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "compiled", tuple(re.compile(p) for p in self.refusal_patterns))

    def applies_to(self, model: str) -> bool:
        return model in self.models
