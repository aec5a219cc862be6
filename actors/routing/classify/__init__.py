"""The rule classifier of smart routing: pure, deterministic, no I/O."""

from switchyard.actors.routing.classify.language import detect_language, estimated_tokens, weighted_length
from switchyard.actors.routing.classify.rule import RuleClassifier
from switchyard.actors.routing.classify.signals import SIGNALS

__all__ = ["SIGNALS", "RuleClassifier", "detect_language", "estimated_tokens", "weighted_length"]
