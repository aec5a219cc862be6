"""What one attempt sends: the backend's wire, the body in its format, the headers and the URL.

Built by ``RequestActor._attempt`` before it dials. A body this backend cannot
be given (its translation refuses the call) passes the backend over and is
never the call's end; a wire that fails on its own is our 500, no backend's
fault (``verdicts.our_failure``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
from attrs import frozen

from switchyard.actors import hops
from switchyard.actors.addressing import api_url
from switchyard.actors.call import attempt_body
from switchyard.actors.call.verdicts import our_failure
from switchyard.actors.errors import GatewayError
from switchyard.actors.messages import Call
from switchyard.actors.relay import AttemptFailed
from switchyard.actors.routing.failover import Failure, Kind
from switchyard.actors.stream_usage import without_option
from switchyard.actors.trace import new_span_id, outbound_headers
from switchyard.actors.wire import Wire, Wires
from switchyard.config.schema import BackendConfig

if TYPE_CHECKING:
    from switchyard.actors.prompts import PromptStore


@frozen
class Outbound:
    wire: Wire
    content: bytes
    headers: list[tuple[str, str]]
    url: httpx.URL
    span_id: str | None   # this attempt's span, when the call carries a trace


def outbound(wires: Wires, prompts: "PromptStore", call: Call, routed: str, backend: BackendConfig, model: str,
             body: bytes | None, refused: bool) -> Outbound:
    """The request of an attempt for ``model`` on ``backend`` (``body``: one made already, e.g. a resume's;
    ``refused``: the backend refused the stream usage option, its streams are not asked for usage)."""
    try:
        wire = wires.wire_for(call, backend, model)
        content = wire.body(body if body is not None else attempt_body.body_for(
            call, routed, model, backend, prompts, refused=refused), backend, call)
        if attempt_body.leaves_out_door_usage(call, backend, refused):
            content = without_option(content)
    except GatewayError as err:
        said = attempt_body.in_client_indices(err, call, model, backend, prompts) if body is None else err
        raise AttemptFailed(Failure(Kind.UNHEALTHY), said, upstream=False) from None
    except Exception as exc:   # the wire's own bug: our 500, no backend's fault
        raise our_failure(exc, backend.name) from None
    headers = wire.headers(backend, call)
    headers.append(hops.outbound(call.hops))   # the next gateway, if this backend is one, counts it
    span_id = None
    if call.trace is not None:   # the same trace id on every attempt; a new span id for each one
        span_id = new_span_id()
        headers += outbound_headers(call.trace, call.snapshot.tracing, span_id)
    return Outbound(wire, content, headers, api_url(backend.url, wire.path), span_id)
