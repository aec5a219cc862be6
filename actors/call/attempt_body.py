"""What each attempt sends and what its answer says: the body for one backend, the thinking
splitter its model needs, and our headers.

Functions of values (the call, the model it is routed as, the attempt's
backend), so the RequestActor asks and nothing is shared. The client's bytes
go out untouched whenever nothing has to change them (a stream asked for its
usage and nothing else: with the option appended to them); otherwise a copy is
built for the attempt's backend: its wire id, a fallback hop's trimmed
parameters (the request_params policy's fields always travel), the global
prompt for that model and backend, and the backend's ``request_extensions.body``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio

from switchyard.actors.errors import GatewayError, UpstreamStatusError
from switchyard.actors.messages import Call
from switchyard.actors.params import HEADER, header_value
from switchyard.actors.routing.body_merge import merge_body
from switchyard.actors.routing.failover import RoutePlan
from switchyard.actors.routing.prompt_merge import renumber
from switchyard.actors.routing.thinking import active as thinking_active
from switchyard.actors.signals import SignalTerms
from switchyard.actors.stream_usage import client_options, names_the_option, with_option
from switchyard.actors.thinking import ThinkingStream
from switchyard.actors.usage import UsageLedger, UsageRecord, token_counts
from switchyard.config.endpoints import AUDIO, IMAGES, SCORING, TRANSCRIBING, Endpoint
from switchyard.config.kinds import kind_of
from switchyard.config.kinds.base import StreamUsage
from switchyard.config.params import SPELLINGS
from switchyard.config.schema import BackendConfig

if TYPE_CHECKING:
    from switchyard.actors.prompts import PromptStore


def body_for(call: Call, routed: str, model: str, backend: BackendConfig, prompts: "PromptStore", *,
             refused: bool) -> bytes:
    """The body for ``model`` on ``backend`` of a call routed as ``routed``: the client's own bytes
    when they already say what this backend is to get; otherwise a re-serialized copy carrying the
    wire id (the backend's ``upstream_id`` for it, else ``model``), trimmed for a fallback chain
    model, with the global prompt, the backend's body extensions and the usage option (``refused``:
    the backend refused it, see ``asks_usage``)."""
    wire = backend.upstream_ids.get(model, model)
    primary = model == routed
    prompted = call.endpoint not in NO_MESSAGES and prompts.prompt_for(model, backend.name) is not None
    if primary and wire == call.model and not prompted and backend.request_extensions.empty:
        if not asks_usage(call, backend, refused):
            return call.body
        # A stream asked for its usage, and nothing else to change: the option spliced into the client's
        # bytes, instead of copying and re-serializing the whole body (most of every stream's body work).
        spliced = with_option(call.body) if "stream_options" not in call.payload else None
        if spliced is not None:
            return spliced
    payload: dict[str, Any] = dict(call.payload)
    if not primary and not call.snapshot.fallback.fallback_policy.preserve_parameters:
        # what the policy wrote travels on every hop, in whichever spelling it was written
        keep = ESSENTIAL_FIELDS.union(ENDPOINT_FIELDS.get(call.endpoint, ()),
                                      *(SPELLINGS.get(f, (f,)) for f in call.managed_params))
        payload = {k: v for k, v in payload.items() if k in keep}
    payload["model"] = wire
    return json.dumps(for_backend(call, payload, model, backend, prompts, refused=refused)).encode()


def in_client_indices(err: GatewayError, call: Call, model: str, backend: BackendConfig, prompts: "PromptStore"
                      ) -> GatewayError:
    """An attempt's error that names a message of the body the backend got, renumbered to the client's
    messages where the global prompt moved them (a message of its own put first): a client that sent one
    message never reads ``messages[1]``. Only on an error's way out: a call that succeeds pays nothing.
    ``err`` itself when nothing moved."""
    if call.endpoint in NO_MESSAGES:
        return err
    moved = prompts.client_indices(call.payload, model, backend.name)
    if moved is None:
        return err
    if isinstance(err, UpstreamStatusError):   # the backend's own body says it; our message names no message
        return err.rewrite_text(lambda text: renumber(text, moved))
    param = renumber(err.param, moved) if err.param is not None else None
    message = renumber(err.message, moved)
    return err.evolve(param=param, message=message) if (param, message) != (err.param, err.message) else err


def for_backend(call: Call, payload: dict[str, Any], model: str, backend: BackendConfig,
                prompts: "PromptStore", *, refused: bool) -> dict[str, Any]:
    """``payload`` with the global prompt for ``model`` on ``backend``, that backend's extensions and the
    usage option (``refused``: see ``asks_usage``).

    The prompt store applies its own (live) strategy and text together, so a
    reload never pairs one revision's text with another's strategy."""
    if call.endpoint not in NO_MESSAGES:   # a global prompt is a chat message
        payload = prompts.merge_into(payload, model, backend.name)
    payload = merge_body(payload, backend.request_extensions)
    if asks_usage(call, backend, refused):
        payload = {**payload, "stream_options": {**(payload.get("stream_options") or {}), "include_usage": True}}
    return payload


def asks_usage(call: Call, backend: BackendConfig, refused: bool) -> bool:
    """Whether this attempt asks the backend for a stream's usage the client did not ask for.

    Every call is priced on the tokens it used (the usage ledger), and
    usage_weight meters them per backend; an OpenAI-style stream reports
    them only with ``stream_options.include_usage``. Every kind whose stream
    reports usage when asked (``StreamUsage.OPTION``: OpenAI's wire) is asked,
    as its ``stream_usage`` says: ``always``, ``auto`` unless the backend
    refused the option (``refused``: ``actors/stream_usage.py``), never
    ``never``; a kind whose wire reads the option (gemini) is always asked.
    The usage chunk is not relayed to a client that did not ask for it
    (``hides_usage``).
    """
    if not call.stream or call.endpoint not in USAGE_ENDPOINTS or client_asks_usage(call):
        return False
    usage = kind_of(backend).stream_usage
    if usage is StreamUsage.WIRE:   # its wire reads the option (protocol/wires/gemini.py)
        return True
    mode = backend.stream_usage
    return usage is StreamUsage.OPTION and (mode == "always" or mode == "auto" and not refused)


def drops_usage_on_refusal(call: Call, backend: BackendConfig, refused: bool) -> bool:
    """Whether this attempt, refused for the usage option, is sent again without it: the option is ours alone
    (the client wrote no ``stream_options``, which would make the refusal its own, or its door wrote them:
    ``door_usage``) and ``backend`` says ``auto``."""
    return backend.stream_usage == "auto" and kind_of(backend).stream_usage is StreamUsage.OPTION \
        and (asks_usage(call, backend, refused) and not client_options(call.payload) or door_usage(call, backend))


def door_usage(call: Call, backend: BackendConfig) -> bool:
    """Whether a stream's usage option is its door's, not the client's: a Messages client (its door asks for
    the usage message_delta reports) or a Responses client on a chat backend (the bridge asks for the usage
    response.completed reports) cannot write ``stream_options.include_usage``; ``backends[].stream_usage``
    governs it too. A Responses call to a backend with the Responses API carries the client's own body."""
    if not call.stream:
        return False
    if call.endpoint == Endpoint.RESPONSES:
        return not kind_of(backend).responses_api
    return call.ingress.get("api") == "anthropic"


def leaves_out_door_usage(call: Call, backend: BackendConfig, refused: bool) -> bool:
    """Whether a door's usage option is left out of this attempt's body: ``backend`` says ``never``, or it
    refused the option under ``auto``. Its answer then ends without usage (the call is estimated)."""
    mode = backend.stream_usage
    return kind_of(backend).stream_usage is StreamUsage.OPTION and (mode == "never" or mode == "auto" and refused) \
        and door_usage(call, backend)


def refuses_usage(err: GatewayError) -> bool:
    """Whether an attempt's error is its backend refusing ``stream_options`` (``actors/stream_usage.py``)."""
    return isinstance(err, UpstreamStatusError) and names_the_option(err.status, err.raw_body)


def hides_usage(call: Call) -> bool:
    """Whether a usage-only chunk is kept from the client: it did not ask for one (whether the attempt
    asked, or the backend sends it unasked), so the stream it gets is the one it asked for."""
    return call.stream and call.endpoint in USAGE_ENDPOINTS and not client_asks_usage(call)


def client_asks_usage(call: Call) -> bool:
    options = call.payload.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def thinking_for(call: Call, backend: BackendConfig, model: str) -> ThinkingStream | None:
    """A fresh splitter when ``model`` on ``backend`` has a thinking pattern that rewrites (chat messages only)."""
    if call.endpoint in NO_MESSAGES:
        return None
    meta = call.snapshot.metadata_for(model, backend.name)
    thinking = meta.thinking if meta is not None else None
    return ThinkingStream(thinking) if thinking is not None and thinking_active(thinking) else None


def record_usage(signals: SignalTerms, usage_ledger: UsageLedger, call: Call, backend: str, model: str,
                 began: float, usage_tokens: int | None, usage: Any) -> None:
    """An answered attempt's tokens: for usage_weight's window (``signals``), and the ``client`` purpose of
    the usage totals."""
    if usage_tokens is not None and call.snapshot.routing.usage_weight.enabled:
        signals.record_usage(backend, usage_tokens, trio.current_time())
    usage_ledger.record(UsageRecord("client", call.request_id, call.key.id if call.key else None, backend, model,
                                    *token_counts(usage), status=200, at=began))


def param_headers(call: Call) -> list[tuple[bytes, bytes]]:
    """``x-continuum-request-params``: which request_params actions changed the call (never values)."""
    value = header_value(call.param_tokens)
    return [(HEADER, value)] if value is not None else []


def fallback_headers(call: Call, routed: str, plan: RoutePlan, attempts: int) -> list[tuple[bytes, bytes]]:
    """The ``x-fallback-*`` headers of an answer from a chain model (none for ``routed``'s own)."""
    if plan.hops == 0:
        return []
    settings = call.snapshot.fallback.model_settings.get(routed)
    if settings is not None and not settings.notify_on_fallback:
        return []
    return [(b"x-fallback-used", b"true"), (b"x-fallback-original-model", call.model.encode()),
            (b"x-fallback-model", plan.model.encode()), (b"x-fallback-attempts", str(attempts).encode())]


ESSENTIAL_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice",
                              "response_format", "user"})
# The other endpoints' own fields a fallback hop keeps: the input, and what shapes the answer the client decodes.
ENDPOINT_FIELDS = {Endpoint.COMPLETIONS: frozenset({"prompt", "suffix", "echo"}),
                   Endpoint.EMBEDDINGS: frozenset({"input", "encoding_format", "dimensions"}),
                   Endpoint.RESPONSES: frozenset({"input", "instructions", "text", "reasoning", "max_output_tokens",
                                                  "include", "previous_response_id", "store", "parallel_tool_calls",
                                                  "conversation", "prompt", "truncation"})}
# The images API's own fields (protocol/doors/images.py): all of them shape the answer.
ENDPOINT_FIELDS.update(dict.fromkeys(IMAGES, frozenset({
    "prompt", "n", "size", "quality", "style", "response_format", "background", "moderation", "output_format",
    "output_compression", "input_fidelity", "partial_images"})))
# The audio API's own fields (protocol/doors/audio.py): the input, and what shapes the answer.
ENDPOINT_FIELDS.update(dict.fromkeys(TRANSCRIBING, frozenset({
    "language", "prompt", "response_format", "temperature", "timestamp_granularities[]", "include[]",
    "chunking_strategy"})))
ENDPOINT_FIELDS[Endpoint.AUDIO_SPEECH] = frozenset({"input", "voice", "response_format", "speed", "instructions",
                                                    "stream_format"})
# POST /v1/responses/compact: what it compacts (a fallback hop keeps it).
ENDPOINT_FIELDS[Endpoint.COMPACT] = frozenset({"input", "instructions", "previous_response_id", "prompt_cache_key",
                                               "prompt_cache_retention", "service_tier"})
# Rerank's and moderations' own fields (protocol/doors/scoring.py).
ENDPOINT_FIELDS[Endpoint.RERANK] = frozenset({"query", "documents", "top_n", "return_documents", "max_chunks_per_doc",
                                              "max_tokens_per_doc", "rank_fields"})
ENDPOINT_FIELDS[Endpoint.MODERATIONS] = frozenset({"input"})
# Endpoints whose streams take stream_options.include_usage.
USAGE_ENDPOINTS = frozenset({Endpoint.CHAT, Endpoint.COMPLETIONS})
# Endpoints whose bodies carry no chat messages: no global prompt, no thinking split, no usage option added.
NO_MESSAGES = frozenset({Endpoint.COMPLETIONS, Endpoint.EMBEDDINGS, Endpoint.RESPONSES, Endpoint.COMPACT, *IMAGES,
                         *SCORING, *AUDIO})
