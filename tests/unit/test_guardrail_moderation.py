"""How a moderation guardrail reads a moderations answer: which categories count, and what is malformed."""

import re

import pytest

from switchyard.actors.guardrails.moderation import Malformed, flagged
from switchyard.config.guardrails import Moderation


def result(categories, scores):
    return {"flagged": any(categories.values()), "categories": categories, "category_scores": scores}


ANSWER = {"results": [result({"hate": False, "violence": True, "illicit": None}, {"hate": 0.6, "violence": 0.4}),
                      result({"hate": False, "sexual": True}, {"hate": 0.1, "sexual": 0.9})]}


def test_without_a_threshold_the_answers_own_booleans_count_in_every_result():
    assert flagged(ANSWER, 2, Moderation(model="m")) == ("violence", "sexual")


def test_with_a_threshold_a_category_counts_by_its_score_whatever_its_boolean():
    assert flagged(ANSWER, 2, Moderation(model="m", threshold=0.5)) == ("hate", "sexual")


def test_categories_keeps_only_the_ones_named():
    assert flagged(ANSWER, 2, Moderation(model="m", categories=("hate", "sexual"))) == ("sexual",)


@pytest.mark.parametrize("answer, count, threshold, why", [
    ({"results": [result({"hate": False}, {})]}, 2, None, "'results' must hold 2 result(s), one per text"),
    ({"id": "x"}, 1, None, "'results' must hold 1 result(s), one per text"),
    ({"results": [{"flagged": True}]}, 1, None, "results[0].categories must be an object"),
    ({"results": [result({"hate": "yes"}, {})]}, 1, None, "results[0].categories.hate must be true or false"),
    ({"results": [result({}, {"hate": "high"})]}, 1, 0.5, "results[0].category_scores.hate must be a number"),
])
def test_an_answer_the_guardrail_cannot_read_is_malformed(answer, count, threshold, why):
    with pytest.raises(Malformed, match=f"^{re.escape(why)}$"):
        flagged(answer, count, Moderation(model="m", threshold=threshold))
