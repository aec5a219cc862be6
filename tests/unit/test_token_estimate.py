"""The input-size estimate shared by smart routing's input_tokens and fallback's context-window check."""

from switchyard.actors.routing.capabilities import needs_of
from switchyard.actors.routing.token_estimate import estimate_tokens

REQUEST, MESSAGE, CONTENT_KEY = 3, 4, 3      # framing, and "content" (7 ASCII characters) as a key


def one_message(content) -> dict:
    return {"messages": [{"role": "user", "content": content}]}


def test_an_empty_request_is_the_request_framing_alone():
    assert estimate_tokens({}) == REQUEST


def test_each_message_adds_a_fixed_framing_allowance():
    assert estimate_tokens({"messages": [{"role": "user"}, {"role": "assistant"}]}) == REQUEST + 2 * MESSAGE


def test_ascii_text_is_about_three_characters_a_token_rounded_up_per_string():
    assert estimate_tokens(one_message("abc")) == REQUEST + MESSAGE + CONTENT_KEY + 1
    assert estimate_tokens(one_message("abcd")) == REQUEST + MESSAGE + CONTENT_KEY + 2
    assert estimate_tokens(one_message("")) == REQUEST + MESSAGE + CONTENT_KEY


def test_each_non_ascii_character_is_a_token():
    assert estimate_tokens(one_message("안녕하세요")) == REQUEST + MESSAGE + CONTENT_KEY + 5
    assert estimate_tokens(one_message("ok 🙂")) == REQUEST + MESSAGE + CONTENT_KEY + 1 + 1


def test_json_numbers_and_booleans_are_five_tokens_each_and_null_nothing():
    base = estimate_tokens(one_message([]))
    assert estimate_tokens(one_message([1, 2.5, True, False, None])) == base + 4 * 5


def test_role_is_not_counted_but_every_other_message_field_is():
    message = {"role": "assistant", "name": "bob", "tool_calls": [{"id": "c1"}]}
    # "name" 2 + "bob" 1 + "tool_calls" 4 + "id" 1 + "c1" 1
    assert estimate_tokens({"messages": [message]}) == REQUEST + MESSAGE + 2 + 1 + 4 + 1 + 1


def test_every_message_counts_not_only_the_last_turn():
    turn = {"role": "user", "content": "x" * 30}
    one, three = estimate_tokens({"messages": [turn]}), estimate_tokens({"messages": [turn] * 3})
    assert three - REQUEST == 3 * (one - REQUEST)


def test_mapping_keys_count_as_text():
    part = {"type": "text", "text": "abcdef"}       # "type" 2 + "text" 2 + "text" 2 + "abcdef" 2
    assert estimate_tokens(one_message([part])) == REQUEST + MESSAGE + CONTENT_KEY + 8


def test_tools_functions_and_response_format_count_other_top_level_fields_do_not():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    response_format = {"type": "json_object"}
    base = estimate_tokens({"model": "m" * 300, "temperature": 0.5, "max_tokens": 10, "stream": True})
    assert base == REQUEST
    # tools: "type" 2 + "function" 3 + "function" 3 + "name" 2 + "f" 1 + "parameters" 4 + "type" 2 + "object" 2
    assert estimate_tokens({"tools": tools}) == REQUEST + 19
    assert estimate_tokens({"functions": tools}) == REQUEST + 19
    assert estimate_tokens({"response_format": response_format}) == REQUEST + 2 + 4


def test_a_base64_data_url_counts_like_any_string():
    url = "data:image/png;base64," + "A" * 299_978
    part = {"type": "image_url", "image_url": {"url": url}}
    # "type" 2 + "image_url" 3 + "image_url" 3 + "url" 1 + the URL's 300,000 characters
    assert estimate_tokens(one_message([part])) == REQUEST + MESSAGE + CONTENT_KEY + 9 + 100_000


def test_deeply_nested_content_does_not_exhaust_the_stack():
    nested: list = ["abc"]
    for _ in range(10_000):
        nested = [nested]
    assert estimate_tokens(one_message(nested)) == REQUEST + MESSAGE + CONTENT_KEY + 1


def test_fallback_needs_use_the_same_estimate_plus_the_completion_budget():
    payload = {"max_tokens": 100, "messages": [{"role": "user", "content": "héllo wörld"}]}
    assert needs_of(payload).tokens == estimate_tokens(payload) + 100


def test_a_schema_type_that_is_a_list_or_a_property_schema_is_counted_as_text_never_as_an_image():
    # zod's .nullable() gives "type": [..., "null"]; a property named "type" puts a schema under "type"
    schema = {"type": "object", "properties": {"type": {"type": "string"}, "note": {"type": ["string", "null"]}}}
    payload = {"tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    assert estimate_tokens(payload, image_tokens=1000) == estimate_tokens(payload) > REQUEST
