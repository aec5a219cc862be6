"""What an attempt does with the backend's answer, and the permit a fallback dial waits for.

``answer`` judges the status (an error status is the attempt's failure, classified for the route plan;
a redirect is a misconfigured url) and relays a success by the call's endpoint: the Responses API and
images and audio by their own rules, chat and the other OpenAI endpoints streamed or buffered. The RequestActor
(``request.py``) calls it inside the attempt's budget and owns what happens after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import trio

from switchyard.actors.audio_relay import relay_speech, relay_transcription
from switchyard.actors.budgets import AttemptBudget, CallBudget
from switchyard.actors.call import stored_responses
from switchyard.actors.call.stored_responses import RESPONSES_ENDPOINTS
from switchyard.actors.errors import UpstreamConnectError, UpstreamProtocolError, UpstreamStatusError
from switchyard.actors.images_relay import relay_images
from switchyard.actors.messages import Call
from switchyard.actors.relay import AttemptFailed, Relay, read_answer
from switchyard.actors.responses_relay import relay_responses
from switchyard.actors.routing.failover import Failure, Kind, classify_status, parse_retry_after
from switchyard.actors.scores_relay import relay_scores
from switchyard.actors.wire import RESPONSES_OVER_CHAT
from switchyard.config.endpoints import IMAGES, SCORING, TRANSCRIBING, Endpoint
from switchyard.config.kinds import kind_of
from switchyard.config.schema import BackendConfig

if TYPE_CHECKING:
    from switchyard.actors.pool import BackendPool
    from switchyard.actors.stored_owners import StoredOwners


async def answer(pool: "BackendPool", owners: "StoredOwners", call: Call, relay: Relay, backend: BackendConfig,
                 response: httpx.Response, attempt: AttemptBudget, began: float,
                 route_headers: list[tuple[bytes, bytes]]) -> None:
    """Relay ``response`` to the client, or raise AttemptFailed for an error status or a redirect.
    ``route_headers`` are the call's own (fallback, variant, parameter and route headers); ``pool`` hears
    a success's latency, ``owners`` the id of a stored Response."""
    status = response.status_code
    # A kind's own request id reaches the client (a native Anthropic backend's: the Messages door shows it).
    id_header = kind_of(backend).request_id_header
    own_id = response.headers.get(id_header) if id_header is not None else None
    passed = [(b"request-id", own_id.encode("latin-1"))] if own_id else []
    if status >= 400:
        body = await read_answer(backend.name, response, relay.answer_limit)
        retry_after = response.headers.get("retry-after")
        err = UpstreamStatusError(backend.name, status, body, response.headers.get("content-type", "").encode(),
                                  retry_after, extra_headers=passed)
        raise AttemptFailed(
            Failure(classify_status(status, body), status=status, retry_after=parse_retry_after(retry_after)), err)
    if status >= 300:  # a misconfigured url: no retry here, move on like an unhealthy backend
        raise AttemptFailed(Failure(Kind.UNHEALTHY), UpstreamProtocolError(
            f"Backend '{backend.name}' answered a redirect (HTTP {status}); point its url at the API itself",
            details={"status": status}))
    # error answers can be fast; only successes say how quick a backend is
    pool.observe_latency(backend.name, trio.current_time() - began)
    headers = [(b"content-type", response.headers.get("content-type", "application/json").encode()),
               *route_headers, *passed]
    if call.endpoint in RESPONSES_ENDPOINTS:   # no chat answer: relayed unchanged, by its rules
        remember = stored_responses.Remember(owners, call, backend.name)
        if response.extensions.get(RESPONSES_OVER_CHAT):
            remember.stored = False   # a chat backend's answer, translated: it keeps nothing to retrieve
        # the owner is noted (and told to the shared store) before the answer naming the id leaves
        stored = await relay_responses(relay, backend.name, response, attempt, headers, call.stream, remember)
        await remember(stored)
    elif call.endpoint in IMAGES:
        await relay_images(relay, backend.name, response, attempt, headers, call.payload)
    elif call.endpoint in SCORING:
        await relay_scores(relay, backend.name, response, attempt, headers, call.endpoint, call.payload)
    elif call.endpoint in TRANSCRIBING:
        await relay_transcription(relay, backend.name, response, attempt, headers, call)
    elif call.endpoint == Endpoint.AUDIO_SPEECH:
        await relay_speech(relay, backend.name, response, attempt, headers, call)
    elif call.stream:
        await relay.stream(backend.name, response, attempt, headers)
    else:
        await relay.buffered(backend.name, response, attempt, headers)


async def fallback_permit(pool: "BackendPool", call: Call, backend: BackendConfig,
                          budget: CallBudget) -> trio.Semaphore | None:
    """A fallback dial permit, waited for FIFO up to the connect limit or what the budget has left; an
    attempt that gets none fails over (the wait was not the backend's time)."""
    sem = pool.dial_bound(backend.name)
    if sem is None:
        return None
    wait = min(call.snapshot.timeouts.connection, budget.left())
    with trio.move_on_after(wait) as waited:
        await sem.acquire()
    if waited.cancelled_caught:
        pool.dial_saturated[backend.name] += 1
        raise AttemptFailed(Failure(Kind.UNHEALTHY), UpstreamConnectError(
            f"Backend '{backend.name}' has no free fallback dial permit (waited {wait:g}s)",
            code="fallback_dial_bound_saturated"), upstream=False)
    return sem
