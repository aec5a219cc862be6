"""The formal-proof floor: a request for a proof of a formula is expert, however short.

Short requests cannot score expert (see ``rule.py``), but a formal proof is
recognisable by its form alone. The last user message is floored at expert
when all of these hold:

1. it has math notation (``markup.has_math``);
2. it has a proof expression: an entry of the ``proof`` keyword category of
   the request's table ("proof", "prove", "show that", "lemma", "증명", ...);
3. it asks for a proof: a phrase of ``PROOF_REQUESTS`` matches ("prove that",
   "give a proof", "show that", "증명하라", "증명해", "증명하시오", ...);
4. it does not ask about one: no phrase of ``PROOF_QUESTIONS`` matches
   ("what is a proof", "explain the proof", "why does this proof", "증명이란",
   "증명이 뭐", ...). A message doing both is taken as a question.

Request and question phrases are built in (English and Korean, whatever the
table) and matched with the keyword rules of ``keywords.py``.
"""

from __future__ import annotations

from switchyard.actors.routing.classify.keyword_tables import PROOF_QUESTIONS, PROOF_REQUESTS
from switchyard.actors.routing.classify.keywords import KeywordSet, Scanned
from switchyard.actors.routing.classify.markup import has_math, without_fences

REQUESTS = KeywordSet.of(PROOF_REQUESTS)
QUESTIONS = KeywordSet.of(PROOF_QUESTIONS)


def asks_for_proof(last_user: str, proof_expressions: KeywordSet) -> bool:
    """Whether the last user message asks for a formal proof (the four conditions above)."""
    prose = without_fences(last_user)
    if not has_math(prose):
        return False
    scanned = Scanned(prose)
    return (bool(proof_expressions.matches(scanned)) and bool(REQUESTS.matches(scanned))
            and not QUESTIONS.matches(scanned))
