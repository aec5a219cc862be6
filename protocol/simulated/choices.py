"""The parts of a simulated chat answer OpenAI's schema asks for: ``n`` choices, ``logprobs``, ``refusal``.

OpenAI's OpenAPI spec requires, on a chat completion's choice, ``index``,
``message``, ``finish_reason`` and ``logprobs`` (null unless asked), and on
its message ``role``, ``content`` and ``refusal`` (null); a chunk's choice
carries ``index``, ``delta``, ``finish_reason`` and ``logprobs``. Each token
log probability has ``token``, ``logprob``, ``bytes`` and ``top_logprobs``
(at most ``top_logprobs`` entries, the token itself first).

The simulator's pieces stand for tokens. Every choice carries the same
pieces, and their log probabilities are a fixed function of each piece's
position, so a test can compute what any backend answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switchyard.protocol.simulated.parts import TOOL_CALL_ID, TOOL_NAME

if TYPE_CHECKING:
    from switchyard.config.simulation import Simulation

MAX_CHOICES = 128         # OpenAI's bound on ``n``
MAX_TOP_LOGPROBS = 20     # and on ``top_logprobs``
FINGERPRINT = "fp_simulated"


def choice_count(body: dict[str, Any]) -> int:
    """How many choices ``body`` asks for (``n``, checked in ``checks.py``); 1 when unset."""
    n = body.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1


def top_logprobs(body: dict[str, Any]) -> int | None:
    """How many alternatives each token lists, or None when ``logprobs`` is not asked for."""
    if body.get("logprobs") is not True:
        return None
    top = body.get("top_logprobs")
    return top if isinstance(top, int) and not isinstance(top, bool) else 0


def token_logprob(piece: str, position: int, top: int) -> dict[str, Any]:
    """One piece's log probability: fixed by its position; ``top`` alternatives, the piece itself first."""
    logprob = -0.0625 * (position % 8 + 1)
    alternatives = [{"token": piece, "logprob": logprob, "bytes": list(piece.encode())}]
    alternatives += [{"token": f" alt{j}", "logprob": logprob - j, "bytes": list(f" alt{j}".encode())}
                     for j in range(1, top)]
    return {"token": piece, "logprob": logprob, "bytes": list(piece.encode()), "top_logprobs": alternatives[:top]}


def logprobs(pieces: list[str], first: int, top: int | None, tool_call: bool) -> dict[str, Any] | None:
    """A choice's ``logprobs`` for ``pieces`` (the first at position ``first``); None when not asked for.

    A tool call's arguments have none, as on OpenAI: ``content`` is null then."""
    if top is None:
        return None
    content = None if tool_call else [token_logprob(p, first + i, top) for i, p in enumerate(pieces) if p]
    return {"content": content, "refusal": None}


def message(text: str, tool_call: bool, name: str = TOOL_NAME, calls: int = 1) -> dict[str, Any]:
    """The assistant message of a buffered choice: its text, or ``calls`` calls of ``name`` (``get_weather``
    unless the request offered a tool the simulator calls) with ``text`` as arguments."""
    if tool_call:
        return {"role": "assistant", "content": None, "refusal": None, "annotations": [], "tool_calls": [
            {"id": call_id(j), "type": "function", "function": {"name": name, "arguments": text}}
            for j in range(calls)]}
    return {"role": "assistant", "content": text, "refusal": None, "annotations": []}


def call_id(j: int) -> str:
    """The id of an answer's ``j``-th tool call (0-based): ``call_sim``, ``call_sim_2``, ..."""
    return TOOL_CALL_ID if j == 0 else f"{TOOL_CALL_ID}_{j + 1}"


def buffered_choices(body: dict[str, Any], pieces: list[str], tool_call: bool, name: str = TOOL_NAME,
                     calls: int = 1) -> list[dict[str, Any]]:
    text, top = "".join(pieces), top_logprobs(body)
    finish = "tool_calls" if tool_call else "stop"
    return [{"index": i, "message": message(text, tool_call, name, calls),
             "logprobs": logprobs(pieces, 0, top, tool_call), "finish_reason": finish}
            for i in range(choice_count(body))]


def chunk_choice(body: dict[str, Any], index: int, delta: dict[str, Any], piece: str, position: int,
                 tool_call: bool, finish: str | None = None) -> dict[str, Any]:
    """One choice of a chunk: its delta, and the log probability of ``piece`` when asked for."""
    top = top_logprobs(body)
    return {"index": index, "delta": delta,
            "logprobs": logprobs([piece], position, top, tool_call) if piece and top is not None else None,
            "finish_reason": finish}


def chat_delta(sim: "Simulation", k: int, token: str, name: str = TOOL_NAME) -> dict[str, Any]:
    """Chunk ``k``'s delta: a piece of the text, or of the tool call's arguments (the first names the call)."""
    if sim.failure.tool_call:
        call: dict[str, Any] = {"index": 0, "function": {"arguments": token}}
        if k == 1:
            call = {"index": 0, "id": TOOL_CALL_ID, "type": "function",
                    "function": {"name": name, "arguments": token}}
            return {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
        return {"tool_calls": [call]}
    return {"role": "assistant", "content": token, "refusal": None} if k == 1 else {"content": token}
