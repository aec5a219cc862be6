"""What a ``type: bedrock`` backend may say, beyond the fields every backend has.

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
(``models``, exact ids, no globs) and is never asked for a list.
"""

from __future__ import annotations

from switchyard.config.fields import read
from switchyard.config.rules import Reader, child
from switchyard.config.schema import BackendConfig, BackendType, is_glob

RUNTIME_URL = "https://bedrock-runtime.{region}.amazonaws.com"   # a bedrock backend's url when none is given


def bedrock_fields(r: Reader, btype: BackendType, url: str, models: tuple[str, ...],
                   api_key: str | None) -> tuple[str, str | None, str | None]:
    """The backend's url (the region's runtime when none is given), ``region`` and ``aws_profile``;
    errors for what a bedrock backend needs or another type may not say."""
    region = read(r, BackendConfig, "region")
    profile = read(r, BackendConfig, "aws_profile")
    if btype is not BackendType.BEDROCK:
        for key in ("region", "aws_profile"):
            if r.has(key):
                r.problems.error(child(r.path, key), f"only applies to backends of type bedrock, not {btype.value}")
        return url, None, None
    if region is None:
        r.problems.error(child(r.path, "region"), "is required for type bedrock (an AWS region such as "
                                                  "us-east-1: it picks the runtime's url and scopes the signature)")
    elif not r.has("url"):
        url = RUNTIME_URL.format(region=region)
    if profile is not None and api_key:
        r.problems.error(child(r.path, "aws_profile"), "and api_key are both set: a bedrock backend is signed "
                                                       "with AWS credentials or sent a Bedrock API key, not both")
    if not models:
        r.problems.error(child(r.path, "models"), "is required for type bedrock: Bedrock's model list is on its "
                                                  "control plane, so name the model ids (or inference profile "
                                                  "ids) this backend serves")
    for i, model in enumerate(models):
        if is_glob(model):
            r.problems.error(child(child(r.path, "models"), i), f"must be an exact model id on a bedrock backend "
                                                                f"(nothing is discovered to match {model!r})")
    if r.has("discovery") and r.raw.get("discovery") is True:
        r.problems.error(child(r.path, "discovery"), "cannot be on for type bedrock: its model list is not "
                                                     "asked (name the models in 'models')")
    return url, region, profile
