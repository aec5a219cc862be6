"""Where the gateway puts prompt-caching breakpoints (protocol/wires/cache_breakpoints.py): one test per rule."""

import copy

from switchyard.protocol.wires.cache_breakpoints import (
    CACHE_POINT,
    Caching,
    client_marks,
    converse_breakpoints,
    converse_caching,
    messages_breakpoints,
)

MARK = {"type": "ephemeral"}
TOOL = {"name": "t", "input_schema": {"type": "object"}}


def body(**extra):
    return {"model": "claude-x", "max_tokens": 10, "system": "Be kind.", "tools": [TOOL, {**TOOL, "name": "u"}],
            "messages": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
                         {"role": "user", "content": "three"}], **extra}


def marked(out):
    return [at for at, _ in client_marks(out)]


def test_system_prefix_and_last_tool_are_marked_and_the_input_is_left_alone():
    given = body()
    before = copy.deepcopy(given)
    out = messages_breakpoints(given)
    assert given == before
    assert out["system"] == [{"type": "text", "text": "Be kind.", "cache_control": MARK}]
    assert out["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": "two",
                                                                    "cache_control": MARK}]}
    assert out["messages"][2] == {"role": "user", "content": "three"}   # the final user turn: not stable
    assert out["tools"] == [TOOL, {**TOOL, "name": "u", "cache_control": MARK}]


def test_a_clients_marks_are_kept_and_counted_toward_four():
    given = body(system=[{"type": "text", "text": "A"}, {"type": "text", "text": "B", "cache_control": MARK}],
                 tools=[{**TOOL, "cache_control": MARK}])
    given["messages"][2]["content"] = [{"type": "text", "text": "three", "cache_control": MARK}]
    out = messages_breakpoints(given)
    assert out["system"] == given["system"] and out["tools"] == given["tools"]
    assert out["messages"] == given["messages"]   # the client's mark on the last turn covers the prefix
    assert len(marked(out)) == 3


def test_no_more_than_four_marks_and_none_when_the_client_used_them():
    given = body(system=[{"type": "text", "text": "A", "cache_control": MARK}])
    given["messages"] = [{"role": "user", "content": [{"type": "text", "text": f"p{i}", "cache_control": MARK}
                                                      for i in range(3)]}]
    assert messages_breakpoints(given) is given
    three = body(system=[{"type": "text", "text": "A", "cache_control": MARK}])
    three["messages"][2]["content"] = [{"type": "text", "text": "x", "cache_control": MARK},
                                       {"type": "text", "text": "y", "cache_control": MARK}]
    out = messages_breakpoints(three)
    assert len(marked(out)) == 4 and "cache_control" in out["tools"][-1]   # the one left: the tools


def test_with_one_mark_left_the_system_comes_first():
    given = body(tools=None)
    given["messages"][2]["content"] = [{"type": "text", "text": c, "cache_control": MARK} for c in "xyz"]
    out = messages_breakpoints(given)
    assert "cache_control" in out["system"][0] and out["messages"][1]["content"] == "two"


def test_no_mark_goes_before_a_clients_one_hour_mark():
    long = {"type": "ephemeral", "ttl": "1h"}
    given = body()
    given["messages"][1]["content"] = [{"type": "text", "text": "two", "cache_control": long}]
    out = messages_breakpoints(given)
    assert out["system"] == "Be kind." and "cache_control" not in out["tools"][-1]


def test_thinking_and_empty_text_blocks_are_never_marked():
    given = body()
    given["messages"][1]["content"] = [{"type": "text", "text": "two"}, {"type": "text", "text": ""},
                                       {"type": "thinking", "thinking": "hm", "signature": "s"}]
    out = messages_breakpoints(given)
    assert out["messages"][1]["content"][0]["cache_control"] == MARK
    assert all("cache_control" not in b for b in out["messages"][1]["content"][1:])


def test_a_single_turn_has_no_stable_prefix_to_mark():
    out = messages_breakpoints(body(messages=[{"role": "user", "content": "hi"}]))
    assert out["messages"] == [{"role": "user", "content": "hi"}]


def test_converse_gets_cache_points_after_system_prefix_and_tools():
    converse = {"system": [{"text": "Be kind."}], "toolConfig": {"tools": [{"toolSpec": {"name": "t"}}]},
                "messages": [{"role": "user", "content": [{"text": "one"}]},
                             {"role": "assistant", "content": [{"text": "two"}]},
                             {"role": "user", "content": [{"text": "three"}]}]}
    out = converse_breakpoints(converse, Caching.FULL)
    assert out["system"] == [{"text": "Be kind."}, CACHE_POINT]
    assert out["messages"][1]["content"] == [{"text": "two"}, CACHE_POINT]
    assert out["messages"][2]["content"] == [{"text": "three"}]
    assert out["toolConfig"]["tools"][-1] == CACHE_POINT
    assert "cachePoint" not in str(converse_breakpoints(converse, Caching.NO_TOOLS)["toolConfig"])


def test_bedrock_models_that_take_cache_points_are_the_documented_ones():
    assert converse_caching("anthropic.claude-3-7-sonnet-20250219-v1:0") is Caching.FULL
    assert converse_caching("us.anthropic.claude-sonnet-4-5-20250929-v1:0") is Caching.FULL
    assert converse_caching("amazon.nova-pro-v1:0") is Caching.NO_TOOLS
    assert converse_caching("anthropic.claude-3-haiku-20240307-v1:0") is None
    assert converse_caching("meta.llama3-70b-instruct-v1:0") is None
