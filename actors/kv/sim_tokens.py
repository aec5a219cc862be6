"""The simulated engines' tokenizer: the same token ids in the simulated engine and in the gateway's index.

A simulated backend has no real model, so its engine (``protocol/simulated``)
and the gateway agree on this stand-in: the chat rendered by a fixed
template (``<|role|>`` and the message's text per message, then the
assistant's turn), split into words, punctuation and runs of spaces, each
piece's id a stable hash of it. Deterministic across processes (no
``hash()``), so a fleet simulation run twice gives the same table. Pure.
"""

from __future__ import annotations

import re
import zlib
from typing import Any, Mapping, Sequence

VOCABULARY = 50_000
_PIECES = re.compile(r"\w+|[^\w\s]|\s+")


def render(messages: Sequence[Mapping[str, Any]]) -> str:
    out = []
    for message in messages:
        out.append(f"<|{message.get('role', 'user')}|>\n{_text(message.get('content'))}\n")
    out.append("<|assistant|>\n")
    return "".join(out)


_IDS: dict[str, int] = {}   # a piece's id, once computed (words repeat: a dictionary lookup beats the hash)
_IDS_MAX = 200_000


def _id(piece: str) -> int:
    found = _IDS.get(piece)
    if found is None:
        if len(_IDS) >= _IDS_MAX:
            _IDS.clear()
        found = _IDS[piece] = zlib.crc32(piece.encode("utf-8", "surrogatepass")) % VOCABULARY
    return found


def encode(text: str) -> list[int]:
    return [_IDS[piece] if piece in _IDS else _id(piece) for piece in _PIECES.findall(text)]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):   # content parts: their text, in order
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


class SimulatedTokenizer:
    """``prompt_tokens.PromptTokenizer`` for models on simulated backends."""

    def chat(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None = None) -> list[int]:
        return encode(render(messages))

    def text(self, prompt: str) -> list[int]:
        return encode(prompt)
