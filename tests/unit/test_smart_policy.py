"""Smart routing's decision: the first matching policy, then the model within the tier."""

from types import MappingProxyType

import pytest

from switchyard.actors.routing.classification import Classification
from switchyard.actors.routing.smart_policy import Choice, RequestFacts, choose, match_policy
from switchyard.actors.routing.tiers import Candidate, CandidatePool
from switchyard.actors.routing.token_estimate import estimate_tokens
from switchyard.config.smart_routing import PolicyWhen, RouteTo, RoutingPolicy, TokenRange

GENERAL = Classification(complexity="simple", domain="general", confidence=0.9, language="en")


def facts(classification=GENERAL, **extra) -> RequestFacts:
    return RequestFacts(classification, **extra)


def policy(name="p", tier=1, **when) -> RoutingPolicy:
    if "header" in when:
        when["header"] = MappingProxyType(when["header"])
    return RoutingPolicy(name, PolicyWhen(**when), RouteTo(tier=tier))


def matched(policies, f) -> str | None:
    found = match_policy(policies, f)
    return found.name if found is not None else None


def classified(**changes) -> Classification:
    return Classification(**{"complexity": "simple", "domain": "general", "confidence": 0.9, "language": "en",
                             **changes})


# --- policy matching --------------------------------------------------------------

def test_first_matching_policy_wins():
    policies = (policy("no", complexity=("expert",)), policy("first", domain=("general",)), policy("second"))
    assert matched(policies, facts()) == "first"


def test_no_match_and_no_catch_all_is_no_policy():
    assert match_policy((policy(complexity=("expert",)),), facts()) is None


def test_empty_when_is_a_catch_all():
    assert matched((policy("all"),), facts(classified(complexity="expert", domain="code", language=None))) == "all"


def test_fields_of_one_when_are_anded():
    both = policy("both", complexity=("simple",), domain=("code",))
    assert matched((both,), facts()) is None
    assert matched((both,), facts(classified(domain="code"))) == "both"


def test_values_within_one_field_are_ored():
    either = policy("either", complexity=("trivial", "simple"))
    assert matched((either,), facts(classified(complexity="trivial"))) == "either"
    assert matched((either,), facts(classified(complexity="simple"))) == "either"
    assert matched((either,), facts(classified(complexity="moderate"))) is None


def test_domain_compares_the_primary_domain():
    assert matched((policy(domain=("code",)),), facts(classified(domain="code"))) == "p"
    assert matched((policy(domain=("code",)),), facts(classified(domain="analysis"))) is None


def test_requires_matches_when_the_request_needs_any_listed_capability():
    needs_vision = classified(required_capabilities=frozenset({"vision"}))
    assert matched((policy(requires=("vision", "tools")),), facts(needs_vision)) == "p"
    assert matched((policy(requires=("tools",)),), facts(needs_vision)) is None
    assert matched((policy(requires=("vision",)),), facts()) is None


def test_key_tier_compares_the_resolved_tier_and_a_missing_tier_matches_nothing():
    build = policy(key_tier=("tier_build",))
    assert matched((build,), facts(key_tier="tier_build")) == "p"
    assert matched((build,), facts(key_tier="tier_free")) is None
    assert matched((build,), facts(key_tier=None)) is None


def test_org_compares_the_key_organization_and_an_unauthenticated_request_matches_nothing():
    sandbox = policy(org=("org_sandbox",))
    assert matched((sandbox,), facts(org="org_sandbox")) == "p"
    assert matched((sandbox,), facts(org=None)) is None


@pytest.mark.parametrize("language", ["ko", "KO", "ko-KR", "ko_kr"])
def test_language_compares_the_primary_subtag_case_insensitively(language):
    assert matched((policy(language=("ko",)),), facts(classified(language=language))) == "p"


def test_language_differs_from_another_language():
    assert matched((policy(language=("ko",)),), facts(classified(language="ja"))) is None


def test_a_request_without_letters_matches_no_language_condition_not_even_und():
    assert matched((policy(language=("und", "ko")),), facts(classified(language=None))) is None


def test_undetermined_language_matches_a_condition_listing_und():
    assert matched((policy(language=("und",)),), facts(classified(language="und"))) == "p"
    assert matched((policy(language=("en",)),), facts(classified(language="und"))) is None


def test_header_value_matches_case_insensitively():
    hint = policy(header={"x-route-hint": ("thorough",)})
    assert matched((hint,), facts(headers={"x-route-hint": "Thorough"})) == "p"
    assert matched((hint,), facts(headers={"x-route-hint": "quick"})) is None
    assert matched((hint,), facts(headers={})) is None


def test_header_with_an_empty_value_list_checks_presence_only():
    present = policy(header={"x-route-hint": ()})
    assert matched((present,), facts(headers={"x-route-hint": "anything"})) == "p"
    assert matched((present,), facts(headers={"x-other": "thorough"})) is None


def test_every_named_header_must_match():
    two = policy(header={"x-a": ("1",), "x-b": ()})
    assert matched((two,), facts(headers={"x-a": "1"})) is None
    assert matched((two,), facts(headers={"x-a": "1", "x-b": ""})) == "p"


def test_header_value_over_256_bytes_counts_as_absent_never_truncated():
    present, hint = policy("present", header={"x-route-hint": ()}), policy("hint", header={"x-route-hint": ("a",)})
    assert matched((present,), facts(headers={"x-route-hint": "a" * 256})) == "present"
    assert matched((present,), facts(headers={"x-route-hint": "a" * 257})) is None
    assert matched((hint,), facts(headers={"x-route-hint": "a" + " " * 256})) is None
    assert matched((present,), facts(headers={"x-route-hint": "한" * 85})) == "present"   # 255 bytes as UTF-8
    assert matched((present,), facts(headers={"x-route-hint": "한" * 86})) is None        # 258 bytes as UTF-8


def test_identity_condition_alone_is_not_a_catch_all():
    assert matched((policy("tier", key_tier=("tier_build",)), policy("all")), facts()) == "all"


def test_input_tokens_compares_the_estimate_with_the_range():
    payload = {"messages": [{"role": "user", "content": "x" * 3000}]}
    size = estimate_tokens(payload)
    long = policy("long", input_tokens=TokenRange(gt=1000))
    assert matched((long,), facts(input_tokens=lambda: estimate_tokens(payload))) == "long"
    assert matched((policy(input_tokens=TokenRange(gte=size + 1)),), facts(input_tokens=lambda: size)) is None
    assert matched((policy(input_tokens=TokenRange(lte=size)),), facts(input_tokens=lambda: size)) == "p"


def test_input_tokens_without_an_estimate_matches_nothing():
    assert matched((policy(input_tokens=TokenRange(gte=0)),), facts(input_tokens=None)) is None


def test_the_estimate_is_computed_once_and_only_when_a_policy_reaches_input_tokens():
    calls = []

    def estimate() -> int:
        calls.append(1)
        return 500

    sized = (policy("a", input_tokens=TokenRange(gt=1000)), policy("b", input_tokens=TokenRange(lt=1000)))
    assert matched(sized, facts(input_tokens=estimate)) == "b"
    assert calls == [1]
    assert matched((policy(domain=("code",), input_tokens=TokenRange(gt=1)), policy("all")),
                   facts(input_tokens=estimate)) == "all"
    assert calls == [1]


# --- choosing the model -------------------------------------------------------------

def cand(model, tier=2, domains=(), cost=None, capabilities=("chat",)) -> Candidate:
    return Candidate(model, tier, "explicit_exact", tuple(domains), cost, capabilities, ("b",))


def pick(candidates, route_to=None, classification=GENERAL, default_tier=2) -> Choice | None:
    return choose(CandidatePool(tuple(candidates)), route_to, classification, default_tier)


def test_empty_pool_chooses_nothing():
    assert pick([], RouteTo(tier=1)) is None


def test_the_requested_tier_is_route_to_tier_else_the_default_tier():
    pool = [cand("one", 1), cand("two", 2), cand("three", 3)]
    assert pick(pool, RouteTo(tier=3)) == Choice("three", 3, 3, 0.15, "requested_tier")
    assert pick(pool, None, default_tier=1).model == "one"
    assert pick(pool, RouteTo(prefer_domains=("code",)), default_tier=2).model == "two"


def test_matching_domain_adds_0_4():
    choice = pick([cand("coder", domains=("code",)), cand("generalist", domains=("general",))])
    assert (choice.model, choice.score) == ("generalist", 0.4 + 0.15)


def test_prefer_domains_add_0_3_times_the_share_held():
    route = RouteTo(tier=2, prefer_domains=("code", "reasoning"))
    half = pick([cand("half", domains=("code",))], route, classified(domain="analysis"))
    full = pick([cand("full", domains=("code", "reasoning"))], route, classified(domain="analysis"))
    assert (half.score, full.score) == (0.3, 0.45)      # prefer share + the neutral cost 0.15
    assert pick([cand("half", domains=("code",)), cand("full", domains=("code", "reasoning"))], route).model == "full"


def test_cheaper_known_input_cost_scores_more_and_the_dearest_gets_the_neutral_0_15():
    pool = [cand("cheap", cost=0.001), cand("mid", cost=0.0025), cand("dear", cost=0.005)]
    assert pick(pool) == Choice("cheap", 2, 2, 0.27, "requested_tier")   # 0.3 x (1 - 0.001 / 0.01)
    assert pick(pool[1:]).score == 0.225
    assert pick(pool[2:]).score == 0.15


def test_all_free_models_get_0_3_for_cost():
    assert pick([cand("free", cost=0.0)]).score == 0.3


def test_a_candidate_without_cost_gets_the_neutral_0_15_like_the_dearest_priced_one():
    # The dearest priced model ties with an unpriced one (0.15 each); the tie goes to the lower id.
    assert pick([cand("unknown"), cand("dear", cost=0.005)]) == Choice("dear", 2, 2, 0.15, "requested_tier")
    assert pick([cand("unknown"), cand("cheap", cost=0.001), cand("dear", cost=0.005)]).model == "cheap"


def test_cost_is_relative_to_the_dearest_in_the_same_tier_only():
    pool = [cand("dear-elsewhere", tier=1, cost=1.0), cand("only", tier=2, cost=0.01)]
    assert pick(pool).score == 0.15


def test_equal_scores_go_to_the_lowest_model_id():
    assert pick([cand("b"), cand("a"), cand("c")]).model == "a"


def test_empty_requested_tier_falls_back_to_the_nearest_tier():
    assert pick([cand("one", 1), cand("three", 3)], RouteTo(tier=2)) == Choice("one", 1, 2, 0.15, "tier_fallback")
    assert pick([cand("three", 3)], RouteTo(tier=2)).tier == 3
    assert pick([cand("two", 2), cand("three", 3)], RouteTo(tier=1)).model == "two"


def test_tier_fallback_tries_distance_one_before_distance_two():
    assert pick([cand("two", 2), cand("three", 3)], RouteTo(tier=1)).tier == 2
    assert pick([cand("one", 1), cand("two", 2)], RouteTo(tier=3)).tier == 2
    assert pick([cand("one", 1)], RouteTo(tier=3)) == Choice("one", 1, 3, 0.15, "tier_fallback")


def test_required_capabilities_filter_candidates_before_the_tier():
    pool = [cand("text-only", 1), cand("sees", 2, capabilities=("chat", "vision"))]
    assert pick(pool, RouteTo(tier=1, require_capabilities=("vision",))) == Choice(
        "sees", 2, 1, 0.15, "tier_fallback")


def test_tools_are_met_by_tool_tools_or_function_calling():
    route = RouteTo(tier=2, require_capabilities=("tools",))
    for caps in (("tool",), ("tools",), ("function_calling",)):
        assert pick([cand("m", capabilities=caps)], route).model == "m"
    assert pick([cand("m", capabilities=("chat",))], route) is None


def test_unknown_capabilities_are_not_eligible_when_something_is_required():
    unknown = cand("unknown", capabilities=None)
    assert pick([unknown], RouteTo(tier=2, require_capabilities=("vision",))) is None
    assert pick([unknown], RouteTo(tier=2)).model == "unknown"
