"""What every simulated backend shares: its words, its tool call, its in-band error, and the stream
that paces an answer (``protocol/simulated/openai.py`` and the endpoint simulators build on it)."""

from __future__ import annotations

import json
import re
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any, AsyncGenerator, AsyncIterator, Callable, Protocol

import httpx
import trio

if TYPE_CHECKING:
    from switchyard.config.simulation import Simulation

_WORDS = ("The quick brown fox jumps over the lazy dog while the router keeps every "
          "stream flowing and every budget honest").split()

TOOL_CALL_ID = "call_sim"
TOOL_NAME = "get_weather"
TOOL_ARGUMENTS = '{"city": "Paris"}'
IN_BAND_ERROR = {"error": {"message": "simulated in-band error", "type": "server_error",
                           "code": "simulated_error"}}
PREFILL_UNSUPPORTED = {"error": {"message": "assistant prefill is not supported",
                                 "type": "invalid_request_error", "param": "messages",
                                 "code": "prefill_unsupported"}}

# What a server that takes no stream_options answers a body carrying one (Simulation.supports_stream_options).
STREAM_OPTIONS_UNSUPPORTED = {"error": {"message": "Unrecognized request argument supplied: stream_options",
                                        "type": "invalid_request_error", "param": "stream_options",
                                        "code": "unsupported_parameter"}}

_WORDISH = re.compile(r"\s*\S+|\s+")


def split_words(text: str, n: int) -> list[str]:
    """``text`` as at most ``n`` pieces of whole words (leading spaces attached), evenly.

    Fewer pieces when the text has fewer words; none for an empty text.
    ``"".join(split_words(text, n)) == text`` always.
    """
    tokens = _WORDISH.findall(text)
    if len(tokens) > 1 and not tokens[-1].strip():
        tokens[-2:] = [tokens[-2] + tokens[-1]]  # trailing whitespace stays with the last word
    return _group(tokens, n)


def split_even(text: str, n: int) -> list[str]:
    """``text`` as at most ``n`` pieces of characters, evenly (for JSON arguments)."""
    return _group(list(text), n)


def _group(tokens: list[str], n: int) -> list[str]:
    n = max(1, min(n, len(tokens)))
    size, extra = divmod(len(tokens), n)
    out, at = [], 0
    for i in range(n if tokens else 0):
        take = size + (1 if i < extra else 0)
        out.append("".join(tokens[at:at + take]))
        at += take
    return out


def sse_event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def prompt_token_count(body: dict[str, Any]) -> int:
    """A chat body's ``usage.prompt_tokens``: about four characters a token."""
    text = json.dumps(body.get("messages", []))
    return max(1, len(text) // 4)


async def paced(pieces: list[str], tokens_per_second: float) -> AsyncGenerator[tuple[int, str], None]:
    """Pieces with their 1-based number, one every ``1/tokens_per_second`` after the first (0: all at once)."""
    gap = 1.0 / tokens_per_second if tokens_per_second > 0 else 0.0
    for k, piece in enumerate(pieces, start=1):
        if k > 1 and gap:
            await trio.sleep(gap)
        yield k, piece


def prefill_of(body: dict[str, Any]) -> str | None:
    """The text of a trailing assistant message, or None when the last message is not one."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    if last.get("role") != "assistant":
        return None
    content = last.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):   # a text that is not a string is the checks' 400 on chat; never a crash here
        return "".join(p["text"] for p in content
                       if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    return ""


class Simulator(Protocol):
    """What the endpoint simulators and a paced stream need of the simulated backend they answer for."""

    in_flight: int                       # requests not yet answered in full (the engine page's running count)
    served: int                          # requests taken in (their ids count them)
    responses_script: deque[Any]         # queued Responses turns (``responses.script_responses``)
    stored_responses: OrderedDict[str, dict[str, Any]]   # the Responses it keeps (``responses_store``)
    response_ids: int                    # Response ids handed out

    def record(self, kind: str) -> None: ...

    def ended(self) -> None: ...         # a request answered in full: no longer running, its slot free

    def reply_pieces(self, sim: "Simulation", body: dict[str, Any], chat: bool = True) -> list[str]: ...

    def paced_pieces(self, sim: "Simulation", pieces: list[str],
                     body: Any = None) -> AsyncGenerator[tuple[int, str], None]: ...

    def buffered_body(self, sim: "Simulation", cid: str, body: dict[str, Any],
                      render: Callable[[list[str]], str]) -> AsyncGenerator[bytes, None]: ...


class SimulatedStream(httpx.AsyncByteStream):
    def __init__(self, owner: "Simulator", chunks: AsyncIterator[bytes]) -> None:
        self.owner = owner
        self.chunks = chunks
        self.finished = False
        self.released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks:
            yield chunk
        self.finished = True
        self._release()

    async def aclose(self) -> None:
        if not self.finished:
            self.owner.record("cancelled")
            self.finished = True
        self._release()

    def _release(self) -> None:
        if not self.released:   # the request stops counting as running on the engine page
            self.released = True
            self.owner.ended()
