"""inject(): each merge strategy, on string and parts content, with and without a system message."""

import copy

import pytest

from switchyard.actors.routing.prompt_merge import client_indices, inject, renumber
from switchyard.config.prompts import MergeStrategy

SEP = "\n\n"
G = "Follow the policy."


def body(*messages):
    return {"model": "m", "stream": False, "messages": list(messages)}


def sys(content, role="system"):
    return {"role": role, "content": content}


def user(content="hi"):
    return {"role": "user", "content": content}


def parts(*texts):
    return [{"type": "text", "text": t} for t in texts]


# --- prepend ----------------------------------------------------------------------

def test_prepend_string_into_a_leading_system_message():
    out = inject(body(sys("Be brief."), user()), G, "prepend", SEP)
    assert out["messages"] == [sys(G + SEP + "Be brief."), user()]


def test_prepend_without_a_system_message_inserts_one_first():
    out = inject(body(user()), G, MergeStrategy.PREPEND, SEP)
    assert out["messages"] == [sys(G), user()]


def test_prepend_with_a_system_message_not_first_still_puts_the_prompt_first():
    out = inject(body(user(), sys("late")), G, "prepend", SEP)
    assert out["messages"] == [sys(G), user(), sys("late")]


def test_prepend_parts_content_gets_a_text_part_at_the_start_with_the_separator_inside():
    out = inject(body(sys(parts("Be brief.")), user()), G, "prepend", SEP)
    assert out["messages"][0] == sys(parts(G + SEP, "Be brief."))


def test_prepend_into_a_developer_message_keeps_its_role():
    out = inject(body(sys("dev rules", role="developer"), user()), G, "prepend", SEP)
    assert out["messages"][0] == sys(G + SEP + "dev rules", role="developer")


# --- append -----------------------------------------------------------------------

def test_append_string_into_the_first_system_message():
    out = inject(body(user(), sys("Be brief."), sys("second")), G, "append", SEP)
    assert out["messages"] == [user(), sys("Be brief." + SEP + G), sys("second")]


def test_append_without_a_system_message_inserts_one_first():
    out = inject(body(user()), G, "append", SEP)
    assert out["messages"] == [sys(G), user()]


def test_append_parts_content_gets_a_text_part_at_the_end_with_the_separator_inside():
    out = inject(body(sys(parts("a", "b")), user()), G, "append", SEP)
    assert out["messages"][0] == sys(parts("a", "b", SEP + G))


# --- replace ----------------------------------------------------------------------

def test_replace_removes_every_system_and_developer_message():
    out = inject(body(sys("one"), user(), sys("two", role="developer"), user("more")), G, "replace", SEP)
    assert out["messages"] == [sys(G), user(), user("more")]


def test_replace_without_a_system_message_inserts_one_first():
    out = inject(body(user()), G, "replace", SEP)
    assert out["messages"] == [sys(G), user()]


def test_replace_parts_content_system_message_is_replaced_too():
    out = inject(body(sys(parts("x")), user()), G, "replace", SEP)
    assert out["messages"] == [sys(G), user()]


# --- edges --------------------------------------------------------------------------

@pytest.mark.parametrize("empty", [None, "", []])
def test_empty_system_content_takes_the_text_without_a_dangling_separator(empty):
    out = inject(body(sys(empty), user()), G, "prepend", SEP)
    assert out["messages"][0]["content"] in (G, parts(G))


def test_unknown_content_shape_is_left_alone_and_a_system_message_is_inserted():
    odd = sys({"weird": True})
    out = inject(body(odd, user()), G, "prepend", SEP)
    assert out["messages"] == [sys(G), odd, user()]


def test_custom_separator_is_used_verbatim():
    out = inject(body(sys("x")), G, "append", "\n\n---\n\n")
    assert out["messages"][0]["content"] == "x\n\n---\n\n" + G


@pytest.mark.parametrize("strategy", list(MergeStrategy))
def test_never_mutates_the_input(strategy):
    original = body(sys(parts("p")), sys("s"), user())
    frozen = copy.deepcopy(original)
    out = inject(original, G, strategy, SEP)
    assert original == frozen
    assert out is not original and out["messages"] is not original["messages"]


def test_no_messages_list_returns_an_unchanged_copy():
    payload = {"model": "m", "prompt": "legacy completion"}
    out = inject(payload, G, "prepend", SEP)
    assert out == payload and out is not payload


def test_empty_text_changes_nothing():
    payload = body(user())
    assert inject(payload, "", "replace", SEP) == payload


def test_other_fields_are_kept():
    out = inject({**body(user()), "temperature": 0.2}, G, "prepend", SEP)
    assert out["temperature"] == 0.2 and out["model"] == "m"


@pytest.mark.parametrize("strategy", list(MergeStrategy))
def test_a_role_that_is_not_a_string_is_no_system_message(strategy):
    odd = {"role": ["system"], "content": "x"}
    out = inject(body(odd, user()), G, strategy, SEP)
    assert out["messages"] == [{"role": "system", "content": G}, odd, user()]


# --- where the client's messages went: errors speak in the client's indices ----------------------------------

def test_a_prompt_merged_into_a_system_message_moves_no_message():
    assert client_indices(body(sys("Be brief."), user()), G, "prepend", SEP) is None
    assert client_indices(body(user(), sys("late")), G, "append", SEP) is None


def test_a_prompt_put_first_moves_every_client_message_one_down():
    assert client_indices(body(user(), user()), G, "prepend", SEP) == (None, 0, 1)


def test_replace_keeps_the_client_messages_that_are_not_system_ones_in_order():
    assert client_indices(body(sys("a"), user(), sys("b"), user()), G, "replace", SEP) == (None, 1, 3)


def test_renumber_writes_each_message_path_as_the_client_sent_it():
    moved = (None, 0, 1)
    assert renumber("Invalid type for 'messages[1].content[0].text'", moved) == \
        "Invalid type for 'messages[0].content[0].text'"
    assert renumber("messages[2] and messages[0] and messages[9]", moved) == "messages[1] and messages[0] and " \
                                                                            "messages[9]"
    assert renumber("my_messages[1] is not a path of ours", moved) == "my_messages[1] is not a path of ours"
