"""``type: gemini``: Google's native Gemini API, generateContent (protocol/wires/gemini.py).

Its key goes in ``x-goog-api-key``; its paths carry ``/v1beta``, so a url
written with it is taken without (the wire adds the version to every path).
Its wire asks a stream for usage whenever the client's body does.
"""

from __future__ import annotations

import attrs

from switchyard.config.endpoints import Endpoint
from switchyard.config.kinds.base import (
    ALL_PARAMS,
    Api,
    Auth,
    Draft,
    EnginePage,
    InProcess,
    Kind,
    ListShape,
    ModelList,
    Prefill,
    StreamUsage,
    any_url,
)
from switchyard.config.rules import Reader
from switchyard.config.schema import BackendType

URL = "https://generativelanguage.googleapis.com"   # its url when none is given
VERSION = "/v1beta"


def settle(r: Reader, draft: Draft) -> Draft:
    url = draft.url.rstrip("/")
    return attrs.evolve(draft, url=url[:-len(VERSION)]) if url.endswith(VERSION) else draft


KIND = Kind(
    type=BackendType.GEMINI,
    default_url=URL, url_required=False, url_rule=any_url, unix_socket=False, auth=Auth("x-goog-api-key"),
    health_path="/v1beta/models", passive_health=False, model_list=ModelList("/v1beta/models", ListShape.GOOGLE),
    engine_page=EnginePage.NONE,
    # Gemini embeds (protocol/wires/gemini_embeddings.py), never completes text
    api=Api.GEMINI, endpoints=frozenset({Endpoint.CHAT, Endpoint.EMBEDDINGS, Endpoint.RESPONSES}), responses_api=False,
    # generationConfig: maxOutputTokens, temperature, topP, topK, penalties
    stream_usage=StreamUsage.WIRE, carries=ALL_PARAMS - {"min_p"}, narrowing=None,
    prefill=Prefill.NONE, structured_output="prompt_only", request_id_header=None, dial_spans_answer=False,
    batch_priced=False, in_process=InProcess.NEVER, keys=(), settle=settle,
)
