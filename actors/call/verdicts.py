"""What an attempt's end says about its backend: whether it feeds the backend's circuit, and the error
an unexpected exception inside the backend's adapter becomes."""

from __future__ import annotations

import logging

from switchyard.actors.errors import UpstreamProtocolError
from switchyard.actors.routing.failover import Failure, Kind

log = logging.getLogger("switchyard.route")

# Answers that say the backend (not the request) is in trouble; they feed its circuit.
BACKEND_FAULT_STATUSES = frozenset({500, 502, 503, 504, 529})   # 529: Anthropic overloaded


def adapter_failed(backend: str, exc: Exception) -> UpstreamProtocolError:
    """The attempt's error for an unexpected exception in ``backend``'s adapter, logged once with its traceback."""
    log.error("backend %r failed inside its adapter (%s); the attempt counts as its failure", backend,
              type(exc).__name__, exc_info=exc)
    err = UpstreamProtocolError(f"Backend '{backend}' failed inside its adapter ({type(exc).__name__})",
                                code="upstream_adapter_error")
    err.backend = backend
    return err


def backend_fault(failure: Failure) -> bool:
    """Whether ``failure`` says the backend, not the request, is in trouble."""
    if failure.kind is Kind.STATUS:
        return failure.status in BACKEND_FAULT_STATUSES
    # UNHEALTHY here is a backend's own misbehaviour (a redirect); the gateway's
    # permit verdict never reaches the circuit.
    return failure.kind in (Kind.TIMEOUT, Kind.CONNECTION, Kind.PROTOCOL, Kind.UNHEALTHY)
