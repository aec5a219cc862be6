"""What a request needs, and what a route is known to lack."""

from switchyard.actors.routing.capabilities import Needs, missing, needs_of
from switchyard.actors.routing.token_estimate import estimate_tokens
from switchyard.config.metadata import Limits, ModelMetadata


def test_needs_tools_vision_and_token_estimate():
    needs = needs_of({"tools": [{"type": "function"}], "max_tokens": 100, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "abcdefgh"}, {"type": "image_url"}]}]})
    # the shared estimate (token_estimate.py): 3 request + 4 message + 3 "content" + 9 text part
    # + 1,000 for the image part + 5 tools, then the completion budget
    assert needs == Needs(tools=True, vision=True, tokens=1024 + 100)


def test_unknown_metadata_rules_nothing_out():
    assert missing(Needs(tools=True, vision=True, tokens=10**9), None) == []
    assert missing(Needs(tools=True), ModelMetadata()) == []


def test_known_gaps_are_named():
    meta = ModelMetadata(capabilities=("chat",), limits=Limits(context_window=10))
    assert missing(Needs(tools=True, vision=True, tokens=11), meta) == ["tools", "vision", "context_window"]
    assert missing(Needs(tools=True), ModelMetadata(capabilities=("function_calling",))) == []


def test_an_inline_image_counts_a_fixed_allowance_not_its_base64_length():
    photo = "data:image/png;base64," + "A" * 750_000
    payload = {"messages": [{"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                                          {"type": "image_url", "image_url": {"url": photo}}]}]}
    needs = needs_of(payload)
    assert needs.vision and 1_000 < needs.tokens < 1_100
    # smart routing's input_tokens still counts the URL, as its rule says
    assert estimate_tokens(payload) > 250_000


def test_a_body_whose_messages_is_not_a_list_needs_nothing_of_it():
    # only chat's door checks `messages`; another endpoint's body may carry anything under that name
    for messages in (None, 5, True, {"role": "user"}):
        assert needs_of({"messages": messages, "tools": [{"type": "function"}]}).tools
