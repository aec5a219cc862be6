"""``type: generic`` (the default): another OpenAI-compatible server, trusted with every parameter, the
images API, rerank (Jina's and Cohere's APIs too: docs/rerank.md), moderations and the realtime
websocket; asked for no structured-output form."""

from __future__ import annotations

from switchyard.config.endpoints import AUDIO, IMAGES, SCORING, Endpoint
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
    type=BackendType.GENERIC,
    default_url=None, url_required=True, url_rule=any_url, unix_socket=True, auth=BEARER,
    health_path="/v1/models", passive_health=False, model_list=ModelList("/v1/models", ListShape.OPENAI),
    engine_page=EnginePage.NONE,
    api=Api.OPENAI, endpoints=TEXT | {*IMAGES, *SCORING, *AUDIO, Endpoint.REALTIME}, responses_api=False,
    stream_usage=StreamUsage.OPTION, carries=ALL_PARAMS, narrowing=None,
    prefill=Prefill.NONE, structured_output="prompt_only", request_id_header=None, dial_spans_answer=False,
    batch_priced=True, in_process=InProcess.NEVER, keys=(STREAM_USAGE,), settle=as_read,
)
