"""A Responses websocket's own responses, kept so that a later turn on the same socket can chain on them.

OpenAI's websocket mode keeps a connection's responses in memory: a turn may
name one made with ``store: false`` as its ``previous_response_id``. The
gateway answers each turn through a backend's HTTP API, where a ``store:
false`` response is kept nowhere (and a chat backend keeps none at all). So
the socket keeps, for each response it relayed that no backend holds, the
conversation that response ends: the input it was made from and its output
items (after the stored response it continued, if it continued one). A turn
naming one is sent with that conversation before its own input, and with
no ``previous_response_id`` (or that stored one's): the backend has nothing
to look up. The answer still names the id the client gave.

The rules are OpenAI's: the responses are this connection's alone (another
socket, or an HTTP call, gets ``previous_response_not_found``); a turn that
fails forgets the response it continued; instructions and tools are the
turn's own, never carried. A ``function_call_output`` must answer a call
the conversation made. Output items go back without their ids, which name
nothing a backend kept, and reasoning items only with their
``encrypted_content``: without it a backend cannot read them when nothing
is stored. Bounded: the ``KEPT`` most recent responses, and ``KEPT_BYTES``
of conversation counted whole for each (an upper bound: they share their
earlier items); the oldest go first.

Pure: no I/O, no clock, no trio.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import attrs

from switchyard.actors.errors import InvalidRequest

KEPT = 32                     # responses per connection
KEPT_BYTES = 16 * 1024 * 1024   # conversation per connection, each response's counted whole


def as_items(value: Any) -> list[Any]:
    """A turn's ``input`` as items: a string is one user message."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def as_input(output: Any) -> list[Any]:
    """A response's output items as the next turn's input, without their ids (a backend that stored nothing
    refuses an id it does not hold: "Item with id ... not found"); a reasoning item only with its encrypted
    content, which carries it instead."""
    return [{key: value for key, value in item.items() if key != "id"} for item in output
            if isinstance(item, dict) and (item.get("type") != "reasoning" or item.get("encrypted_content"))] \
        if isinstance(output, list) else []


def _calls_answered(history: list[Any], new: list[Any]) -> None:
    """Each ``function_call_output`` (and custom tool output) of the turn answers a call made before it."""
    made = {item.get("call_id") for item in history if isinstance(item, dict)
            and item.get("type") in ("function_call", "custom_tool_call")}
    for i, item in enumerate(new):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            made.add(item.get("call_id"))
        elif kind in ("function_call_output", "custom_tool_call_output") and item.get("call_id") not in made:
            raise InvalidRequest(f"No tool call found for function call output with call_id "
                                 f"{item.get('call_id')}.", param=f"input[{i}].call_id", code="invalid_value")


@attrs.frozen
class Turn:
    """One turn's body as sent, and what keeping its response needs."""

    payload: dict[str, Any]            # the body for the backend
    named: str | None                  # the previous_response_id the client gave (forgotten if the turn fails)
    expanded: bool                     # ``named`` was one kept here: ``payload`` carries its conversation
    base: str | None                   # a response a backend holds, which the conversation continues
    conversation: list[Any] = attrs.field(eq=False)   # the input the response is made from, after ``base``


class SocketResponses:
    """The conversations of a socket's responses no backend holds, by response id, newest last."""

    def __init__(self, kept: int = KEPT, kept_bytes: int = KEPT_BYTES) -> None:
        self.kept, self.kept_bytes = kept, kept_bytes
        # response id -> (the held response it continues, its conversation, that conversation's JSON size)
        self._conversations: OrderedDict[str, tuple[str | None, list[Any], int]] = OrderedDict()
        self._bytes = 0

    def __contains__(self, response_id: object) -> bool:
        return response_id in self._conversations

    def __len__(self) -> int:
        return len(self._conversations)

    def turn(self, payload: dict[str, Any]) -> Turn:
        """``payload`` as the backend gets it: when it continues a kept response, with that conversation
        before its input and that response's ``base`` (or no ``previous_response_id``); else as it is."""
        named = payload.get("previous_response_id")
        named = named if isinstance(named, str) and named else None
        new = as_items(payload.get("input"))
        if named is None or named not in self._conversations:
            return Turn(payload, named, False, named, new)
        base, history, _ = self._conversations[named]
        _calls_answered(history, new)
        out = {key: value for key, value in payload.items() if key != "previous_response_id"}
        if base is not None:
            out["previous_response_id"] = base
        conversation = [*history, *new]
        out["input"] = conversation
        return Turn(out, named, True, base, conversation)

    def keep(self, response_id: str, turn: Turn, output: Any) -> None:
        """The conversation ``response_id`` ends: the turn's, then its output."""
        items = [*turn.conversation, *as_input(output)]
        size = len(json.dumps(items))
        self.forget(response_id)
        self._conversations[response_id] = (turn.base, items, size)
        self._bytes += size
        while self._conversations and (len(self._conversations) > self.kept or self._bytes > self.kept_bytes):
            _, (_, _, dropped) = self._conversations.popitem(last=False)
            self._bytes -= dropped

    def forget(self, response_id: str) -> None:
        found = self._conversations.pop(response_id, None)
        if found is not None:
            self._bytes -= found[2]
