"""``type: simulated``: the in-process OpenAI emulator (protocol/simulated/), on a ``*.simulated`` host."""

from __future__ import annotations

from urllib.parse import urlsplit

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
    as_read,
)
from switchyard.config.schema import BackendType
from switchyard.config.values import shown_url


def url_rule(url: str) -> str | None:
    if not (urlsplit(url).hostname or "").endswith(".simulated"):
        return f"of a simulated backend must have a host ending in .simulated, got {shown_url(url)!r}"
    return None


KIND = Kind(
    type=BackendType.SIMULATED,
    default_url="http://{name}.simulated", url_required=False, url_rule=url_rule, unix_socket=False, auth=BEARER,
    health_path="/health", passive_health=False, model_list=ModelList("/v1/models", ListShape.OPENAI),
    engine_page=EnginePage.SIMULATED,
    api=Api.OPENAI, endpoints=TEXT | {Endpoint.COMPACT, *IMAGES, *SCORING, *AUDIO}, responses_api=True,
    stream_usage=StreamUsage.OPTION, carries=ALL_PARAMS, narrowing=None,
    prefill=Prefill.AS_IS, structured_output="json_schema", request_id_header=None, dial_spans_answer=False,
    batch_priced=True, in_process=InProcess.ALWAYS, keys=(STREAM_USAGE,), settle=as_read,
)
