"""What an attempt's end says about its backend: whether it feeds the backend's circuit, whose failure
the circuit counts it as, and the error an unexpected exception in our own code becomes."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from switchyard.actors.errors import GatewayError, InternalError, UpstreamFailure
from switchyard.actors.routing.circuit import ANONYMOUS, EVERY_CALLER
from switchyard.actors.routing.failover import Failure, Kind

if TYPE_CHECKING:
    from switchyard.actors.messages import Call

log = logging.getLogger("switchyard.route")

# Answers that say the backend (not the request) is in trouble; they feed its circuit.
BACKEND_FAULT_STATUSES = frozenset({500, 502, 503, 504, 529})   # 529: Anthropic overloaded


def our_failure(exc: Exception, backend: str | None) -> InternalError:
    """The call's error for an unexpected exception in the gateway's own code while it served the call (a
    wire's translation, the transport, a simulated backend, the relay): our 500, logged once here with its
    traceback. Never a backend's failure: a client's body that trips our code must not open a circuit."""
    where = f" (attempt on backend {backend!r})" if backend is not None else ""
    log.error("internal error while serving the call%s: %s", where, type(exc).__name__, exc_info=exc)
    return InternalError()


def backend_fault(failure: Failure) -> bool:
    """Whether ``failure`` says the backend, not the request, is in trouble."""
    if failure.kind is Kind.STATUS:
        return failure.status in BACKEND_FAULT_STATUSES
    # UNHEALTHY here is a backend's own misbehaviour (a redirect); the gateway's
    # permit verdict never reaches the circuit.
    return failure.kind in (Kind.TIMEOUT, Kind.CONNECTION, Kind.PROTOCOL, Kind.UNHEALTHY)


def failing_caller(call: "Call", error: GatewayError | None = None) -> str:
    """Whose failure ``error`` is, as the route's circuit tells callers apart: everyone's when the
    connection could not even be opened, else the call's API key, else its client's address, else
    the one anonymous caller. Resolved here, on a failure, so a call that succeeds never pays for it."""
    if isinstance(error, UpstreamFailure) and error.unreached:
        return EVERY_CALLER
    if call.key is not None:
        return "key " + call.key.id
    if call.client_address is not None:
        return "ip " + call.client_address()
    return ANONYMOUS
