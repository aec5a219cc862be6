"""Frozen messages exchanged between actors, and the Call a request carries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

import attrs
from attrs import frozen

from switchyard.config.endpoints import Endpoint
from switchyard.config.schema import Snapshot

if TYPE_CHECKING:
    from switchyard.actors.routing.provider_prefs import ProviderPrefs
    from switchyard.actors.trace import TraceContext
    from switchyard.actors.uploads import Uploads
    from switchyard.config.access import ApiKey


@frozen
class Call:
    """One client call, validated, with the Snapshot captured at entry.

    ``body`` is the client's bytes, forwarded untouched unless a feature has
    to change them; ``payload`` is the parsed form the router reads.
    """

    model: str
    stream: bool
    body: bytes
    payload: dict[str, Any] = attrs.field(repr=False, eq=False)
    snapshot: Snapshot = attrs.field(repr=False, eq=False)
    hash_key: str | None = None
    request_id: str = ""
    pin: str | None = None       # x-backend: the backend the first attempt goes to
    # Tracing identifiers read at ingress; None when tracing is off. The same for every attempt.
    trace: "TraceContext | None" = attrs.field(default=None, eq=False)
    key: "ApiKey | None" = attrs.field(default=None, eq=False)              # the verified API key, if keys are on
    prefs: "ProviderPrefs | None" = attrs.field(default=None, eq=False)     # the client's `provider` object, read
    param_tokens: tuple[str, ...] = ()           # what request_params changed, for x-continuum-request-params
    managed_params: frozenset[str] = frozenset()  # fields request_params wrote or limited: kept on every hop
    # model "auto": what smart routing decided (for the trace), and its debug headers for the answer
    smart_route: "Mapping[str, Any] | None" = attrs.field(default=None, eq=False)
    route_headers: tuple[tuple[bytes, bytes], ...] = attrs.field(default=(), eq=False)
    endpoint: Endpoint = Endpoint.CHAT   # which OpenAI API the call is in (actors/wire.py: how backends are spoken to)
    # What a client of another API asked for that its translation into `endpoint` cannot carry, for the
    # wires that speak that API natively (the Anthropic ingress's anthropic-version and beta headers).
    ingress: "Mapping[str, Any]" = attrs.field(factory=dict, eq=False)
    hops: int = attrs.field(default=0, eq=False)   # gateways it passed before this one; upstream gets one more
    # A multipart call's files (the images edits and variations doors); its text fields are `payload`.
    uploads: "Uploads | None" = attrs.field(default=None, eq=False, repr=False)
    # A call without a key: its client's address, resolved only when asked (a failure its route's circuit
    # counts, ``actors/call/verdicts.py``), never on the way. None: no address (in-process, a Unix socket).
    client_address: Callable[[], str] | None = attrs.field(default=None, eq=False, repr=False)
    # A call naming MCP servers in its tools: the request headers those servers' forward_headers name,
    # names lower-cased, sent with each of its tool calls (actors/mcp/toolbox.py).
    tool_headers: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)
    # The client's address as rate_limiting.per_client_ip counts it (None when that scope is off): the
    # gateway's own tool calls for this call count under it, as /mcp's do (actors/call/tool_rounds.py).
    client_ip: str | None = attrs.field(default=None, eq=False, repr=False)
