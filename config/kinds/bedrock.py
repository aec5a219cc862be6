"""``type: bedrock``: Amazon Bedrock's Converse API, SigV4-signed (protocol/wires/bedrock.py).

Bedrock is addressed by region: the runtime's url follows from ``region``
unless one is given (a VPC endpoint, a proxy), and the same region scopes
every request's SigV4 signature, so ``region`` is required. Its credentials
are AWS's (``aws_profile`` names a profile of the shared files) unless
``api_key`` holds a Bedrock API key, sent as a bearer token instead: one or
the other, never both.

Bedrock's model list is a control-plane call on another host
(``ListFoundationModels``), which lists base model ids where most models are
invoked through inference-profile ids (``us.anthropic....``), and needs a
permission inference-only roles lack. So a bedrock backend names its models
(``models``, exact ids, no globs) and is never asked for a list; nor is it
health-checked (no route answers unsigned): its calls alone judge it.
"""

from __future__ import annotations

import attrs

from switchyard.config.endpoints import Endpoint
from switchyard.config.kinds.base import (
    BEARER,
    Api,
    Draft,
    EnginePage,
    InProcess,
    Key,
    Kind,
    Prefill,
    StreamUsage,
    any_url,
)
from switchyard.config.rules import Reader, child
from switchyard.config.schema import BackendType, is_glob

RUNTIME_URL = "https://bedrock-runtime.{region}.amazonaws.com"   # its url when none is given


def settle(r: Reader, draft: Draft) -> Draft:
    """The url (the region's runtime when none is given); errors for what a bedrock backend needs."""
    region, profile, url = draft.own["region"], draft.own["aws_profile"], draft.url
    if region is None:
        r.problems.error(child(r.path, "region"), "is required for type bedrock (an AWS region such as "
                                                  "us-east-1: it picks the runtime's url and scopes the signature)")
    elif not r.has("url"):
        url = RUNTIME_URL.format(region=region)
    if profile is not None and draft.api_key:
        r.problems.error(child(r.path, "aws_profile"), "and api_key are both set: a bedrock backend is signed "
                                                       "with AWS credentials or sent a Bedrock API key, not both")
    if not draft.models:
        r.problems.error(child(r.path, "models"), "is required for type bedrock: Bedrock's model list is on its "
                                                  "control plane, so name the model ids (or inference profile "
                                                  "ids) this backend serves")
    for i, model in enumerate(draft.models):
        if is_glob(model):
            r.problems.error(child(child(r.path, "models"), i), f"must be an exact model id on a bedrock backend "
                                                                f"(nothing is discovered to match {model!r})")
    if r.has("discovery") and r.raw.get("discovery") is True:
        r.problems.error(child(r.path, "discovery"), "cannot be on for type bedrock: its model list is not "
                                                     "asked (name the models in 'models')")
    return attrs.evolve(draft, url=url)


KIND = Kind(
    type=BackendType.BEDROCK,
    # a Bedrock API key is a bearer token; without one each request is signed (the wire's sign)
    default_url=None, url_required=False, url_rule=any_url, unix_socket=False, auth=BEARER,
    health_path="/", passive_health=True, model_list=None, engine_page=EnginePage.NONE,
    api=Api.CONVERSE, endpoints=frozenset({Endpoint.CHAT, Endpoint.RESPONSES}), responses_api=False,
    # Converse reads max_tokens, temperature and top_p (protocol/wires/bedrock_converse.py), but none is
    # declared carried: a field the request_params policy writes is refused on a bedrock hop
    stream_usage=StreamUsage.REPORTED, carries=frozenset(), narrowing=None,
    # a buffered answer has no handshake boundary in its transport: the dial's permit is held to its end
    prefill=Prefill.NONE, structured_output="prompt_only", request_id_header=None, dial_spans_answer=True,
    batch_priced=False, in_process=InProcess.NEVER, keys=(Key("region"), Key("aws_profile")), settle=settle,
)
