"""``type: azure``: Azure OpenAI's v1 API, OpenAI's wire under the resource's ``/openai/v1`` root with the
key in an ``api-key`` header; served by the OpenAI simulator on a ``*.simulated`` host."""

from __future__ import annotations

from urllib.parse import urlsplit

from switchyard.config.endpoints import AUDIO, IMAGES, Endpoint
from switchyard.config.kinds.base import (
    ALL_PARAMS,
    STREAM_USAGE,
    TEXT,
    Api,
    Auth,
    EnginePage,
    InProcess,
    Kind,
    ListShape,
    ModelList,
    Prefill,
    StreamUsage,
    as_read,
)
from switchyard.config.schema import BackendType
from switchyard.config.values import shown_url


def url_rule(url: str) -> str | None:
    if url and not urlsplit(url).path.rstrip("/").endswith("/openai/v1"):
        return ("of an azure backend is its resource's v1 API root, "
                f"https://NAME.openai.azure.com/openai/v1, got {shown_url(url)!r}")
    return None


KIND = Kind(
    type=BackendType.AZURE,
    default_url=None, url_required=True, url_rule=url_rule, unix_socket=False, auth=Auth("api-key"),
    health_path="/v1/models", passive_health=False, model_list=ModelList("/v1/models", ListShape.OPENAI),
    engine_page=EnginePage.NONE,
    api=Api.OPENAI, endpoints=TEXT | {Endpoint.COMPACT, *IMAGES, *AUDIO, Endpoint.MODERATIONS},
    responses_api=True,
    stream_usage=StreamUsage.OPTION, carries=ALL_PARAMS - {"top_k", "min_p"}, narrowing=None,
    prefill=Prefill.NONE, structured_output="prompt_only", request_id_header=None, dial_spans_answer=False,
    batch_priced=False,
    in_process=InProcess.SIMULATED_HOST, keys=(STREAM_USAGE,), settle=as_read,
)
