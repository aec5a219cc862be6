"""``type: vllm``: a vLLM engine's OpenAI-compatible server (all seven parameters, a Prometheus page,
prefill with ``continue_final_message``, its ``/v1/rerank``)."""

from __future__ import annotations

from switchyard.config.endpoints import TRANSCRIBING, Endpoint
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
    type=BackendType.VLLM,
    default_url=None, url_required=True, url_rule=any_url, unix_socket=True, auth=BEARER,
    health_path="/health", passive_health=False, model_list=ModelList("/v1/models", ListShape.OPENAI),
    engine_page=EnginePage.ALWAYS,
    api=Api.OPENAI, endpoints=TEXT | {Endpoint.RERANK, *TRANSCRIBING}, responses_api=False,
    stream_usage=StreamUsage.OPTION, carries=ALL_PARAMS, narrowing=None,
    prefill=Prefill.CONTINUE_FINAL, structured_output="json_schema", request_id_header=None,
    dial_spans_answer=False, batch_priced=True, in_process=InProcess.NEVER, keys=(STREAM_USAGE,), settle=as_read,
)
