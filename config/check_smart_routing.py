"""Smart-routing checks that need the other sections: the classifier's backend, the keys' tiers,
the served model names; and the warnings ``switchyard config validate`` prints."""

from __future__ import annotations

from collections.abc import Sequence

from switchyard.config.access import Access
from switchyard.config.classifier_backend import classifier_backend
from switchyard.config.rules import Problems
from switchyard.config.schema import BackendConfig
from switchyard.config.smart_routing import DETECTED_LANGUAGES, RULE_MAX_CONFIDENCE, SmartRouting

PATH = "smart_routing"


def check(smart: SmartRouting, backends: Sequence[BackendConfig], access: Access, problems: Problems,
          max_concurrent_requests: int = 0) -> None:
    """What needs the other sections: the classifier's backend (an error if named and unusable),
    and the warnings ``config validate`` prints. Run only once the backends are complete."""
    c = smart.classifier
    resolved = classifier_backend(c.llm, backends)
    if c.uses_llm and c.llm.backend is not None and resolved is None:
        state = "is disabled" if any(b.name == c.llm.backend for b in backends) else "does not exist"
        problems.error(f"{PATH}.classifier.llm.backend",
                       f"backend {c.llm.backend!r} {state}; the classifier would silently fall back to rules")
    elif c.uses_llm and resolved is None:
        what = f"method {c.method}" + (" with shadow: true" if c.method == "rule" else "")
        problems.warn(f"{PATH}.classifier.llm.backend",
                      f"{what} but no enabled public backend to classify with: the router will classify by rule"
                      + (" and run no shadow classification" if c.shadow else ""))
    if smart.enabled and c.uses_llm and c.llm.disable_under_load_state and not max_concurrent_requests:
        problems.warn(f"{PATH}.classifier.llm.disable_under_load_state",
                      f"{c.llm.disable_under_load_state!r} has no effect: the load state comes from "
                      "server.max_concurrent_requests, which is 0 (no cap), so the load is always normal")
    served = {m for b in backends if b.enabled and not b.internal for m in b.exact_models}
    if smart.enabled and smart.virtual_model in served:
        problems.warn(f"{PATH}.virtual_model", f"{smart.virtual_model!r} is also a model a backend serves: every "
                                               "request for it is routed by smart routing, and it is never a candidate")
    if smart.enabled and smart.unprofiled_models == "exclude" and not smart.model_profiles:
        problems.warn(f"{PATH}.unprofiled_models",
                      "exclude with no model_profiles: every model is excluded and smart routing has no candidate")
    by_rule = (c.method == "rule" or resolved is None
               or (c.method == "hybrid" and c.rule.confidence_threshold <= RULE_MAX_CONFIDENCE))
    tiers = any(k.tier for k in access.keys)
    for i, policy in enumerate(smart.routing_policies):
        where = f"{PATH}.routing_policies[{i}].when"
        levels = policy.when.complexity or ()
        if smart.enabled and by_rule and "expert" in levels and "complex" not in levels:
            problems.warn(f"{where}.complexity",
                          "matches expert without complex, but the rule classifier rarely reaches expert "
                          "(expert starts at 0.75; requests under 200 estimated tokens without math top out "
                          "at 0.683, under 50 at 0.734): use [complex, expert] or classifier.method llm")
        unknown = [t for t in policy.when.language or () if t not in DETECTED_LANGUAGES]
        if unknown:
            problems.warn(f"{where}.language", f"{', '.join(unknown)}: the classifier detects only "
                                               f"{', '.join(DETECTED_LANGUAGES)}, so these never match")
        if policy.when.key_tier is not None and not tiers:
            problems.warn(f"{where}.key_tier", "no api_keys entry has a tier, so this policy matches nothing "
                                               "(tier conditions fail closed)")
