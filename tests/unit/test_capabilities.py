"""What a request needs, and what a route is known to lack."""

from actors.routing.capabilities import Needs, missing, needs_of
from config.metadata import Limits, ModelMetadata


def test_needs_tools_vision_and_token_estimate():
    needs = needs_of({"tools": [{"type": "function"}], "max_tokens": 100, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "abcdefgh"}, {"type": "image_url"}]}]})
    # the shared estimate (token_estimate.py): 3 request + 4 message + 3 "content" + 9 text part
    # + 5 image part + 5 tools, then the completion budget
    assert needs == Needs(tools=True, vision=True, tokens=29 + 100)


def test_unknown_metadata_rules_nothing_out():
    assert missing(Needs(tools=True, vision=True, tokens=10**9), None) == []
    assert missing(Needs(tools=True), ModelMetadata()) == []


def test_known_gaps_are_named():
    meta = ModelMetadata(capabilities=("chat",), limits=Limits(context_window=10))
    assert missing(Needs(tools=True, vision=True, tokens=11), meta) == ["tools", "vision", "context_window"]
    assert missing(Needs(tools=True), ModelMetadata(capabilities=("function_calling",))) == []
