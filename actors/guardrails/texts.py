"""Where the text of a chat call and of its answer is, read out and written back in place.

The guardrails read every message's text (string content and ``text``
parts), the system and developer messages with them, and the arguments of
an assistant's tool calls; of a buffered answer, each choice's content,
reasoning and tool-call arguments. Each piece is a ``Slot``: its path in the
JSON, so a rewritten text goes back exactly where it came from and nothing
else in the body changes. Pure: no I/O.
"""

from __future__ import annotations

import copy
from typing import Any, Iterator, Sequence

from attrs import frozen

Path = tuple[str, *tuple[str | int, ...]]   # begins with a key of the top-level object


@frozen
class Slot:
    path: Path
    role: str
    text: str
    arguments: bool = False    # a tool call's JSON arguments: a rewrite must stay JSON


def request_slots(payload: dict[str, Any]) -> list[Slot]:
    """The text of a chat payload's messages, in order (system and developer messages are messages)."""
    out: list[Slot] = []
    messages = payload.get("messages")
    for i, msg in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(msg, dict):
            continue
        out.extend(_message(msg, ("messages", i), str(msg.get("role", ""))))
    return out


def answer_slots(answer: dict[str, Any]) -> list[Slot]:
    """The text of a buffered chat completion: each choice's message."""
    out: list[Slot] = []
    for i, choice in enumerate(answer.get("choices") or ()):
        msg = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(msg, dict):
            out.extend(_message(msg, ("choices", i, "message"), str(msg.get("role") or "assistant")))
            reasoning = msg.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                out.append(Slot(("choices", i, "message", "reasoning_content"), "assistant", reasoning))
    return out


def _message(msg: dict[str, Any], at: Path, role: str) -> Iterator[Slot]:
    content = msg.get("content")
    if isinstance(content, str):
        if content:
            yield Slot((*at, "content"), role, content)
    elif isinstance(content, list):
        for j, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                yield Slot((*at, "content", j, "text"), role, part["text"])
    calls = msg.get("tool_calls")   # the chat door checks no more than the role and content of a message
    for j, tc in enumerate(calls if isinstance(calls, list) else ()):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str) and fn["arguments"]:
            yield Slot((*at, "tool_calls", j, "function", "arguments"), role, fn["arguments"], arguments=True)


def rewrite(doc: dict[str, Any], slots: Sequence[Slot], texts: Sequence[str]) -> dict[str, Any]:
    """``doc`` with each slot's text replaced by its new one; ``doc`` itself is left as it was."""
    out = dict(doc)
    top = {s.path[0] for s, t in zip(slots, texts, strict=False) if t != s.text}
    for key in top:
        out[key] = copy.deepcopy(doc[key])
    for slot, text in zip(slots, texts, strict=False):
        if text == slot.text:
            continue
        node: Any = out
        steps: tuple[str | int, ...] = slot.path
        for step in steps[:-1]:
            node = node[step]
        node[steps[-1]] = text
    return out
