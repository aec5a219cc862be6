"""Chat Completions spoken to a native Anthropic backend (``type: anthropic``).

Everything behind the RequestActor thinks in chat completions; this wire
turns an attempt's chat body into a Messages request (``POST /v1/messages``
with ``x-api-key`` and ``anthropic-version``) and the Messages answer back
into chat (``protocol/wires/anthropic_answer.py``), so failover, the relay and the
metrics work unchanged.

A chat field the Messages API cannot carry is refused (400
``unsupported_request_parameter`` naming it) unless its value asks for
nothing (``n: 1``, ``presence_penalty: 0``, ...); fields chat does not know
(Anthropic's own ``thinking``, ``service_tier``, ...) pass as they are, and
Anthropic judges them, except its server-side features (``NOT_CARRIED``:
``container``, ``mcp_servers``, ...), which only the operator may turn on.
The one value ever removed is the spec's: from anthropic-version 2026-10-21
Anthropic rejects ``temperature``, ``top_p`` and ``top_k`` for every model,
so a client's values are left out on such a hop; a value the request_params
policy wrote is refused instead. What chat says that Messages has no place for and that changes no answer (a
message's ``name``, an image's ``detail``, earlier ``reasoning_content``)
is listed in docs/anthropic-backend.md.

A Messages client is not made to lose what chat cannot say (prompt caching's
``cache_control``, earlier thinking blocks and their signatures, documents,
images in tool results, ``service_tier``): when the call came in as Messages
the wire sends the client's own validated body (``Call.ingress
["messages_body"]``) with the model's wire id, the policy's fields, the
sampling rule, ``stream`` and the backend's extensions on top. It does so
only when the attempt's chat body says nothing else the chat side decided (a
global prompt, a variant's effort, a trimmed fallback hop, a resumption):
then the chat translation is the faithful one, and content it cannot carry
(``Call.ingress["uncarried"]``) is refused; so it is on every other backend
type (``refuse_uncarried``, a ``Special`` wire), which passes that backend over.
"""

from __future__ import annotations

import json
from typing import Any

from switchyard.actors.errors import UnsupportedRequestParameter
from switchyard.actors.messages import Call
from switchyard.actors.params import limited_only
from switchyard.actors.routing.body_merge import merge_body
from switchyard.actors.wire import JSON, Special, Wire
from switchyard.config.endpoints import Endpoint
from switchyard.config.kinds import kind_of
from switchyard.config.kinds.anthropic import SAMPLING_REJECTED_FROM, takes_sampling
from switchyard.config.kinds.base import Api
from switchyard.config.schema import BackendConfig
from switchyard.protocol.wires.anthropic_answer import chat_answer
from switchyard.protocol.wires.anthropic_betas import forwarded_betas
from switchyard.protocol.wires.anthropic_messages import NOT_CARRIED, translate_messages
from switchyard.protocol.wires.anthropic_messages import invalid as _invalid
from switchyard.protocol.wires.anthropic_messages import unsupported as _unsupported
from switchyard.protocol.wires.cache_breakpoints import messages_breakpoints

DEFAULT_MAX_TOKENS = 4096            # Messages requires max_tokens; chat does not
SAMPLING = ("temperature", "top_p", "top_k")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
# Chat fields with no Messages counterpart, with the one value that asks for nothing.
NEUTRAL: dict[str, Any] = {"n": 1, "logprobs": False, "top_logprobs": 0, "presence_penalty": 0,
                           "frequency_penalty": 0, "logit_bias": {}, "store": False, "min_p": 0,
                           "modalities": ["text"]}
UNCARRIED = ("seed", "audio", "prediction", "functions", "function_call", "web_search_options")
# OpenAI's hints that change no answer: a prefix-cache routing key (Anthropic caches by cache_control) and an
# end user's id for abuse monitoring (Anthropic's is metadata.user_id: it goes there when the body has none).
HINTS = ("prompt_cache_key", "safety_identifier")
# Read (and translated) here; any other field passes into the Messages body as it is.
CONSUMED = frozenset({"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
                      "stop", "user", "metadata", "tools", "tool_choice", "parallel_tool_calls",
                      "response_format", "reasoning_effort", "output_config", *SAMPLING, *NEUTRAL, *UNCARRIED,
                      *HINTS})


def _ingress(call: Call, name: str) -> str | None:
    """A header the Messages ingress carried for this wire (str or bytes; a list of values joined)."""
    value = call.ingress.get(name)
    if isinstance(value, (list, tuple)):
        value = ",".join(v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in value)
    return (value.decode("latin-1") if isinstance(value, bytes) else value) or None


def anthropic_version(backend: BackendConfig, call: Call) -> str:
    """A Messages client's own anthropic-version; for every other ingress the backend's."""
    return _ingress(call, "anthropic-version") or backend.anthropic_version


def headers(backend: BackendConfig, call: Call) -> list[tuple[str, str]]:
    out = [JSON, ("anthropic-version", anthropic_version(backend, call))]
    if backend.api_key:
        out.append(("x-api-key", backend.api_key))
    beta = forwarded_betas(backend, _ingress(call, "anthropic-beta"))   # backends[].anthropic_betas
    if beta:
        out.append(("anthropic-beta", beta))
    return out


def body(raw: bytes, backend: BackendConfig, call: Call) -> bytes:
    payload = json.loads(raw)
    original = call.ingress.get("messages_body")
    if original is not None and passthrough_fits(payload, backend, call):
        return json.dumps(_cached(passthrough(original, payload, backend, call), backend, call)).encode()
    uncarried = call.ingress.get("uncarried")
    if uncarried:
        path, what = uncarried[0]
        raise UnsupportedRequestParameter(f"{path}: {what} cannot be carried by the chat translation, and this "
                                          f"attempt on backend '{backend.name}' is translated (the gateway changed "
                                          f"the call: a global prompt, a variant, a fallback hop's trimmed "
                                          f"parameters or a resumed stream)", param=path)
    return json.dumps(_cached(messages_request(payload, backend, call), backend, call)).encode()


def _cached(out: dict[str, Any], backend: BackendConfig, call: Call) -> dict[str, Any]:
    """``out`` with prompt-caching breakpoints when the call's snapshot turns them on for this backend and
    model (``prefix_routing.anthropic_cache_control_injection``; ``cache_breakpoints.py``)."""
    injection = call.snapshot.prefix_routing.anthropic_cache_control_injection
    if not injection.enabled:
        return out
    wire = str(out.get("model"))
    names = [m for m, w in backend.upstream_ids.items() if w == wire] + [wire]
    return messages_breakpoints(out) if injection.applies(backend.name, names) else out


# What the chat side may change without the passthrough losing it: the wire id, the policy's fields
# (same names in Messages), the stream. The backend's extension keys are merged into both alike.
PASSED_OVER = frozenset({"model", "max_tokens", "max_completion_tokens", "stream", "stream_options", *SAMPLING})
_ABSENT = object()
SAME_IN_MESSAGES = frozenset({"metadata"})   # a chat field an extension may set that Messages reads alike


def passthrough_fits(payload: dict[str, Any], backend: BackendConfig, call: Call) -> bool:
    """Whether the attempt's chat ``payload`` differs from the ingress's own translation only in what
    the passthrough applies itself (so sending the client's body loses nothing the gateway decided)."""
    chat = call.ingress.get("chat_payload")
    if not isinstance(chat, dict):
        return False
    ext = backend.request_extensions
    extended = set(ext.defaults) | set(ext.overrides)
    if extended & (CONSUMED - PASSED_OVER - SAME_IN_MESSAGES):   # chat-named extensions (stop, user, ...)
        # need the translation: the passthrough would send them under their chat names
        return False
    skip = PASSED_OVER | extended
    return all(payload.get(k, _ABSENT) == chat.get(k, _ABSENT) for k in payload.keys() | chat.keys()
               if k not in skip)


def passthrough(original: dict[str, Any], payload: dict[str, Any], backend: BackendConfig,
                call: Call) -> dict[str, Any]:
    """The client's Messages body for this attempt: the wire id; max_tokens and the sampling fields as
    the chat body has them (the request_params policy's values; a trimmed hop's absence); the sampling
    rule of the hop's anthropic-version; ``stream`` as the call asks; the backend's extensions."""
    out = dict(original)
    out["model"] = payload["model"]
    if payload.get("max_completion_tokens") is not None or payload.get("max_tokens") is not None:
        out["max_tokens"] = _max_tokens(payload, backend)
    for field in SAMPLING:
        out.pop(field, None)
    _sampling(out, payload, backend, call)
    out.pop("stream", None)
    if call.stream:
        out["stream"] = True
    return merge_body(out, backend.request_extensions)


def refuse_uncarried(call: Call, backend: BackendConfig, model: str) -> Wire | None:
    """A ``Special`` wire: a Messages call holding content chat cannot carry, on a backend that is not native
    Anthropic: a wire that refuses it (the attempt passes that backend over), never one that drops it."""
    if not _refuses(call, backend, model):
        return None
    path, what = call.ingress["uncarried"][0]

    def refuse(raw: bytes, backend: BackendConfig, call: Call) -> bytes:
        raise UnsupportedRequestParameter(f"{path}: {what} can be sent only to a native anthropic backend, and "
                                          f"backend '{backend.name}' is of type {backend.type.value} (spoken to "
                                          f"in chat, which cannot carry it)", param=path)
    return Wire("/v1/messages", body=refuse)


def _refuses(call: Call, backend: BackendConfig, model: str) -> bool:
    return call.endpoint == Endpoint.CHAT and bool(call.ingress.get("uncarried")) \
        and kind_of(backend).api is not Api.MESSAGES


def _sampling(out: dict[str, Any], payload: dict[str, Any], backend: BackendConfig, call: Call) -> None:
    """The chat body's sampling fields into ``out``, under the hop's anthropic-version: from 2026-10-21
    a client's value is left out (the spec's rule; one the policy only limited too: it is the client's)
    and one the request_params policy wrote (a default, an override) is refused."""
    version = anthropic_version(backend, call)
    for field in SAMPLING:
        if payload.get(field) is None:
            continue
        if takes_sampling(version):
            out[field] = payload[field]
        elif field in call.managed_params and field not in limited_only(call.param_tokens):
            raise _unsupported(field, f"the request parameter policy set it, and Anthropic rejects it for every "
                                      f"model from anthropic-version {SAMPLING_REJECTED_FROM} (this hop sends "
                                      f"{version})")


def messages_request(payload: dict[str, Any], backend: BackendConfig, call: Call) -> dict[str, Any]:
    """The Messages body for a chat ``payload`` on ``backend``."""
    for field, neutral in NEUTRAL.items():
        if payload.get(field) is not None and payload[field] != neutral:
            raise _unsupported(field, f"the Messages API has no such parameter (only {json.dumps(neutral)}, "
                                      f"which asks for nothing, is accepted)")
    for field in UNCARRIED:
        if payload.get(field) is not None:
            raise _unsupported(field, "the Messages API has no such parameter")
    _server_side_features(payload, backend)
    system, messages = translate_messages(payload["messages"])
    out: dict[str, Any] = {"model": payload["model"], "max_tokens": _max_tokens(payload, backend),
                           "messages": messages}
    if system:
        out["system"] = system
    stop = payload.get("stop")
    if isinstance(stop, str):
        out["stop_sequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if stop:
            out["stop_sequences"] = stop
    elif stop is not None:
        raise _invalid("stop", "must be a string or an array of strings")
    _sampling(out, payload, backend, call)
    metadata = _metadata(payload)
    if metadata:
        out["metadata"] = metadata
    tools = payload.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _invalid("tools", "must be an array")
    if tools:
        out["tools"] = [_tool(t, f"tools[{i}]") for i, t in enumerate(tools)]
    choice = _tool_choice(payload.get("tool_choice"), payload.get("parallel_tool_calls"), bool(tools))
    if choice is not None:
        out["tool_choice"] = choice
    # A Messages client's own thinking config travels beside the chat payload, whose reasoning_effort
    # was only made up from it (Call.ingress "thinking" and "derived"): this backend takes the original.
    derived = call.ingress.get("derived") or ()
    config = _output_config(payload, skip_effort="reasoning_effort" in derived)
    if config:
        out["output_config"] = config
    if call.ingress.get("thinking") is not None and "thinking" not in payload:
        out["thinking"] = call.ingress["thinking"]
    if call.ingress.get("context_management") is not None and "context_management" not in payload:
        out["context_management"] = call.ingress["context_management"]   # a Messages client's, as it sent it
    if payload.get("stream") is True:
        out["stream"] = True
    for key, value in payload.items():   # Anthropic's own fields (thinking, service_tier, ...)
        if key in CONSUMED:
            continue
        if key in out:   # e.g. a top-level `system` beside the system messages: never silently replaced
            raise _invalid(key, f"is set by the translation of the chat body ({key} comes from its messages "
                                f"or fields); send it one way only")
        out[key] = value
    return out


def _server_side_features(payload: dict[str, Any], backend: BackendConfig) -> None:
    """Anthropic's server-side features the Messages ingress refuses by name (``NOT_CARRIED``) are refused
    here too, unless the value is exactly what this backend's ``request_extensions.body`` writes: the operator
    may turn one on, a client may not."""
    configured = merge_body({}, backend.request_extensions)
    for field in sorted(NOT_CARRIED & payload.keys()):
        if field not in configured or payload[field] != configured[field]:
            raise _unsupported(field, "an Anthropic server-side feature Switchyard does not let a client turn on "
                                      "(only the backend's request_extensions may)")


def _max_tokens(payload: dict[str, Any], backend: BackendConfig) -> Any:
    newer, older = payload.get("max_completion_tokens"), payload.get("max_tokens")
    if newer is not None and older is not None and newer != older:
        raise _invalid("max_completion_tokens", f"({newer}) and 'max_tokens' ({older}) disagree; send one")
    if newer is not None or older is not None:
        return newer if newer is not None else older
    wire = payload["model"]
    public = next((m for m, w in backend.upstream_ids.items() if w == wire), wire)
    known = backend.model_configs.get(public)
    cap = known.max_output if known is not None else None
    return min(DEFAULT_MAX_TOKENS, cap) if cap else DEFAULT_MAX_TOKENS


def _metadata(payload: dict[str, Any]) -> dict[str, Any]:
    metadata = payload.get("metadata")
    if metadata is not None and (not isinstance(metadata, dict) or set(metadata) - {"user_id"}):
        raise _unsupported("metadata", "Anthropic's metadata takes only user_id (send the end user as 'user')")
    out = dict(metadata or {})
    user = payload.get("user")
    if user is not None:
        if out.get("user_id") not in (None, user):
            raise _invalid("user", "and 'metadata.user_id' disagree; send one")
        out["user_id"] = user
    safety = payload.get("safety_identifier")
    if isinstance(safety, str) and safety and "user_id" not in out:
        out["user_id"] = safety
    return out


def _tool(tool: Any, path: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise _unsupported(f"{path}.type", f"only function tools have a Messages counterpart, got {kind!r}")
    fn = tool.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise _invalid(f"{path}.function.name", "is required and must be a string")
    out: dict[str, Any] = {"name": fn["name"]}
    if fn.get("description"):
        out["description"] = fn["description"]
    out["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
    if fn.get("strict"):
        out["strict"] = True
    return out


def _tool_choice(choice: Any, parallel: Any, has_tools: bool) -> dict[str, Any] | None:
    if choice is None:
        out = None
    elif choice in ("auto", "none"):
        out = {"type": choice}
    elif choice == "required":
        out = {"type": "any"}
    elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict) \
            and isinstance(choice["function"].get("name"), str):
        out = {"type": "tool", "name": choice["function"]["name"]}
    else:
        raise _invalid("tool_choice", "must be auto, required, none or {type: function, function: {name}}")
    if parallel is False and has_tools:
        out = out or {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def _output_config(payload: dict[str, Any], skip_effort: bool) -> dict[str, Any]:
    given = payload.get("output_config")
    if given is not None and not isinstance(given, dict):
        raise _invalid("output_config", "must be an object")
    config = dict(given or {})
    fmt = payload.get("response_format")
    if fmt is not None:
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_schema":
            given_schema = fmt.get("json_schema")
            if not isinstance(given_schema, dict):
                raise _invalid("response_format.json_schema", "is required and must be an object")
            schema = given_schema.get("schema")
            if not isinstance(schema, dict):
                raise _invalid("response_format.json_schema.schema", "is required and must be an object")
            _set(config, "format", {"type": "json_schema", "schema": schema}, "response_format")
        elif kind != "text":
            raise _unsupported("response_format", f"Anthropic's structured output takes a JSON schema "
                                                  f"(json_schema) only, got {kind!r}")
    effort = payload.get("reasoning_effort")
    if effort is not None and not skip_effort:
        if effort not in EFFORTS:
            raise _unsupported("reasoning_effort", f"Anthropic's effort is one of {', '.join(EFFORTS)}, got {effort!r}")
        _set(config, "effort", effort, "reasoning_effort")
    return config


def _set(config: dict[str, Any], key: str, value: Any, field: str) -> None:
    if key in config and config[key] != value:
        raise _invalid(field, f"and 'output_config.{key}' disagree; send one")
    config[key] = value


# --- messages -----------------------------------------------------------------------------

# Chat to a native Anthropic backend: the Messages API's wire (protocol/wires/native.py); and the special
# (protocol/serving/wiring.py) that passes any other backend over for a Messages call holding what chat
# cannot carry.
WIRE = Wire("/v1/messages", headers=headers, body=body, answer=chat_answer)
NATIVE = Special(lambda call, backend, model: WIRE if call.endpoint == Endpoint.CHAT else None,
                 lambda call, backend, model: call.endpoint == Endpoint.CHAT)
UNCARRIED_WIRE = Special(refuse_uncarried, _refuses)
