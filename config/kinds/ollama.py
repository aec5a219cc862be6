"""``type: ollama``: Ollama's OpenAI-compatible endpoint (no ``top_k`` or ``min_p``; JSON mode)."""

from __future__ import annotations

from switchyard.config.kinds.base import (
    ALL_PARAMS,
    BEARER,
    STREAM_USAGE,
    TEXT,
    Api,
    EnginePage,
    InProcess,
    Kind,
    ListShape,
    ModelList,
    Prefill,
    StreamUsage,
    any_url,
    as_read,
)
from switchyard.config.schema import BackendType

KIND = Kind(
    type=BackendType.OLLAMA,
    default_url=None, url_required=True, url_rule=any_url, unix_socket=True, auth=BEARER,
    health_path="/api/version", passive_health=False, model_list=ModelList("/v1/models", ListShape.OPENAI),
    engine_page=EnginePage.NONE,
    api=Api.OPENAI, endpoints=TEXT, responses_api=False,
    stream_usage=StreamUsage.OPTION, carries=ALL_PARAMS - {"top_k", "min_p"}, narrowing=None,
    prefill=Prefill.NONE, structured_output="json_object", request_id_header=None, dial_spans_answer=False,
    batch_priced=True, in_process=InProcess.NEVER, keys=(STREAM_USAGE,), settle=as_read,
)
