"""Each wire API's own wire: what a backend of a kind is spoken to through (``config/kinds``: ``Kind.api``).

Keyed by the wire API, not the type: every kind spoken to in OpenAI's wire
(openai, azure, the engines, simulated) shares its plain endpoint wires,
and a new kind that speaks an API already here needs nothing added.
``tests/unit/test_kinds.py`` fails while a wire API has no entry.
"""

from __future__ import annotations

from typing import Mapping

from switchyard.actors.wire import PLAIN, Special
from switchyard.config.kinds.base import Api
from switchyard.protocol.wires import anthropic, bedrock, gemini

NATIVE: Mapping[Api, Special] = {
    Api.OPENAI: PLAIN,               # the endpoint's own wire (actors/wire.py: ENDPOINTS)
    Api.MESSAGES: anthropic.NATIVE,  # chat as Messages
    Api.GEMINI: gemini.WIRE,         # chat and embeddings, the model in the URL
    Api.CONVERSE: bedrock.WIRE,      # chat as Converse, the model in the URL, signed
}
