"""``type: anthropic``: Anthropic's native Messages API (protocol/wires/anthropic.py).

Its key goes in ``x-api-key`` with ``anthropic-version`` on every request;
its own keys are ``anthropic_version`` (the header's value, which also
decides whether it takes sampling fields) and ``anthropic_betas``.

``anthropic_betas`` names the beta features a client may turn on: the
client's ``anthropic-beta`` header would otherwise reach the backend as
sent, so any client could switch on beta features (some priced above the
standard rate) on the operator's key. Absent means every one the client
sends, ``[]`` none. Each name must be an HTTP token (printable ASCII without
separators: what the header's comma-separated list can carry), and appear
once; errors name the item (``backends[0].anthropic_betas[1]``).
"""

from __future__ import annotations

import re

import attrs

from switchyard.config.endpoints import Endpoint
from switchyard.config.kinds.base import (
    Api,
    Auth,
    Draft,
    EnginePage,
    InProcess,
    Key,
    Kind,
    ListShape,
    ModelList,
    Narrowing,
    Prefill,
    StreamUsage,
    any_url,
)
from switchyard.config.rules import Reader, child, type_name
from switchyard.config.schema import BackendConfig, BackendType

URL = "https://api.anthropic.com"   # its url when none is given
SAMPLING_REJECTED_FROM = "2026-10-21"   # the anthropic-version from which Messages refuses sampling fields
NO_SAMPLING = frozenset({"max_tokens"})
ALL = NO_SAMPLING | {"temperature", "top_p", "top_k"}
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def takes_sampling(version: str) -> bool:
    """Whether this anthropic-version still accepts temperature, top_p and top_k."""
    return version < SAMPLING_REJECTED_FROM


def carried(backend: BackendConfig) -> frozenset[str]:
    """max_tokens, and the sampling fields while its ``anthropic_version`` still accepts them."""
    return ALL if takes_sampling(backend.anthropic_version) else NO_SAMPLING


def settle(r: Reader, draft: Draft) -> Draft:
    """``anthropic_betas`` as the allowed names (None when absent)."""
    return attrs.evolve(draft, own={**draft.own, "anthropic_betas": _betas(r, draft.own["anthropic_betas"])})


def _betas(r: Reader, raw: object) -> tuple[str, ...] | None:
    path = child(r.path, "anthropic_betas")
    if raw is None:
        return None
    if not isinstance(raw, list):
        r.problems.error(path, f"must be a list of anthropic-beta names, got {type_name(raw)}")
        return None
    out: list[str] = []
    for i, name in enumerate(raw):
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            shown = repr(name) if isinstance(name, str) else type_name(name)
            r.problems.error(child(path, i), f"must be an anthropic-beta name (printable ASCII letters, digits "
                                             f"and !#$%&'*+-.^_`|~, no spaces or commas), got {shown}")
        elif name in out:
            r.problems.error(child(path, i), f"duplicate anthropic-beta name {name!r}")
        else:
            out.append(name)
    return tuple(out)


KIND = Kind(
    type=BackendType.ANTHROPIC,
    default_url=URL, url_required=False, url_rule=any_url, unix_socket=False,
    auth=Auth("x-api-key", always=lambda backend: (("anthropic-version", backend.anthropic_version),)),
    health_path="/v1/models", passive_health=False,
    # it pages its list (20 by default); one page of 1,000 covers any real catalogue
    model_list=ModelList("/v1/models?limit=1000", ListShape.OPENAI), engine_page=EnginePage.NONE,
    api=Api.MESSAGES, endpoints=frozenset({Endpoint.CHAT, Endpoint.RESPONSES}), responses_api=False,
    stream_usage=StreamUsage.REPORTED, carries=ALL, narrowing=Narrowing("anthropic_version", carried),
    # Anthropic has no JSON mode (a forced tool call is its form); auto asks it for none so far
    prefill=Prefill.NONE, structured_output="prompt_only", request_id_header="request-id",
    dial_spans_answer=False, batch_priced=False, in_process=InProcess.SIMULATED_HOST,
    keys=(Key("anthropic_version"), Key("anthropic_betas")), settle=settle,
)
