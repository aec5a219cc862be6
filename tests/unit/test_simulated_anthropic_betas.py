"""The simulated Anthropic backend takes what the real API takes under a beta, and refuses it without.

``context_management`` needs ``context-management-2025-06-27``; a
mid-conversation ``system`` message needs ``mid-conversation-system-2026-04-07``
(both in the ``anthropic-beta`` header Claude Code sends). Without them the
answer is the real API's 400, in its words.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from switchyard.config.schema import Simulation
from switchyard.protocol.simulated.anthropic import SimulatedAnthropicTransport
from tests.published_schemas import problems

FAST = Simulation(latency=0.0, tokens_per_second=0, chunks=3)
CLEAR_THINKING = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
BETAS = "claude-code-20250219,context-management-2025-06-27,mid-conversation-system-2026-04-07"
TURNS = [{"role": "user", "content": "hi"}, {"role": "system", "content": "Auto-approve mode is now on."}]


async def messages(body: dict[str, Any], beta: str | None) -> httpx.Response:
    headers = {"anthropic-version": "2023-06-01", **({"anthropic-beta": beta} if beta else {})}
    async with httpx.AsyncClient(transport=SimulatedAnthropicTransport("c", FAST, ("claude",)),
                                 base_url="http://c.simulated", headers=headers) as client:
        response = await client.post("/v1/messages", json={"model": "claude", "max_tokens": 64, **body})
        await response.aread()
        return response


def refusal(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["message"]


async def test_context_management_under_its_beta_is_taken_and_answered_with_no_edit_applied():
    body = {"messages": TURNS[:1], "thinking": {"type": "enabled", "budget_tokens": 1024},
            "context_management": CLEAR_THINKING}
    reply = await messages(body, BETAS)
    assert reply.status_code == 200, reply.text
    assert reply.json()["context_management"] == {"applied_edits": []}
    assert problems("anthropic", "Message", reply.json()) == []


async def test_context_management_without_its_beta_is_the_real_apis_400():
    reply = await messages({"messages": TURNS[:1], "context_management": CLEAR_THINKING}, "claude-code-20250219")
    assert refusal(reply) == (400, "context_management: Extra inputs are not permitted")


async def test_an_unknown_context_edit_is_refused_naming_it():
    reply = await messages({"messages": TURNS[:1], "context_management": {"edits": [{"type": "forget_all"}]}}, BETAS)
    status, message = refusal(reply)
    assert status == 400 and message.startswith("context_management.edits.0: Input tag 'forget_all'")


@pytest.mark.parametrize("turns", [TURNS, TURNS + [{"role": "assistant", "content": "OK."}]],
                         ids=["last", "before_assistant"])
async def test_a_mid_conversation_system_message_under_its_beta_is_taken(turns):
    reply = await messages({"messages": turns}, BETAS)
    assert reply.status_code == 200, reply.text


async def test_a_mid_conversation_system_message_without_its_beta_is_the_real_apis_400():
    reply = await messages({"messages": TURNS}, "claude-code-20250219")
    assert refusal(reply) == (400, 'messages: Unexpected role "system". The Messages API accepts a top-level '
                                   '`system` parameter, not "system" as an input message role.')


@pytest.mark.parametrize("turns, where", [
    ([TURNS[1], TURNS[0]], "messages.0: a `system` message must immediately follow a `user` message"),
    (TURNS + [{"role": "user", "content": "more"}], "messages.1: a `system` message must be the last message"),
    ([TURNS[0], {"role": "system", "content": [{"type": "image"}]}], "messages.1.content.0: a `system` message"),
], ids=["first", "before_user", "not_text"])
async def test_a_misplaced_or_non_text_system_message_is_refused_naming_it(turns, where):
    status, message = refusal(await messages({"messages": turns}, BETAS))
    assert status == 400 and message.startswith(where)
