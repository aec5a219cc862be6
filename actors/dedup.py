"""DedupCoordinator: identical calls in flight together share one upstream call.

The first call with a key starts a *flight*: its RequestActor (the
``lead``) runs as a task in a long-lived nursery (the Runtime's), so the
shared upstream call belongs to no single client's task, and writes into the
flight itself, a ResponseSink that records the answer (start, each chunk,
finish or fail) and wakes whoever waits. Every client of the flight, the
first included, is a *subscriber*: it replays the record from the beginning
into its own sink and then waits for more, while watching its own
connection. The lead's ``disconnected`` returns only when the last
subscriber is gone, so the upstream call is cancelled exactly then, and a
leader's client leaving never costs a follower its answer.

A call joins only while joining still gives it the whole answer, the same
way as if it had made its own call: a stream until the flight's first byte,
a buffered call until the flight's answer is complete. Otherwise, and when
the key is None, dedup is off or the key table is full, the call runs on its
own. The record never blocks the lead (a slow client cannot slow the others
down), so it holds up to one whole answer; it is freed when the last
subscriber has replayed it, and the table entry goes when the flight ends.
"""

from __future__ import annotations

import enum
import hashlib
import json
import logging
from typing import Any, Awaitable, Callable, Protocol

import attrs
import trio

from switchyard.actors.errors import GatewayError, Unavailable
from switchyard.actors.messages import Call
from switchyard.actors.relay import ResponseSink
from switchyard.config.schema import Dedup

log = logging.getLogger("switchyard.dedup")

Disconnected = Callable[[], Awaitable[None]]
Lead = Callable[[ResponseSink, Disconnected], Awaitable[None]]


class StreamingSink(ResponseSink, Protocol):
    """A client's sink; ``streaming`` decides the join window of the flight it leads."""

    @property
    def streaming(self) -> bool: ...


def dedup_key(call: Call, key_id: str | None, model: str | None = None) -> bytes:
    """The digest that identical calls share: everything that makes the upstream call and its answer.

    Config revision, the endpoint (the same bytes mean different things to embeddings and
    responses), API key id, the routed model (``model``, else
    ``call.model``), the ``x-backend`` pin, stream or not, the consistent-hash
    key, what request_params changed (it shows in the response headers), the
    hop count (a call that came back round a loop of gateways must not wait on
    itself: it goes on, and the hop guard ends the loop), and the body bytes
    the call is dispatched with. Each field is length-prefixed, so no two
    different tuples share an encoding.
    """
    h = hashlib.blake2b(digest_size=32, person=b"switchyard-dedup")
    for part in (call.snapshot.revision, call.endpoint, key_id, model if model is not None else call.model, call.pin,
                 "stream" if call.stream else "buffered", call.hash_key, "\x00".join(call.param_tokens),
                 str(call.hops)):
        hash_field(h, None if part is None else part.encode())
    # What another API's client asked beyond the body (an Anthropic version or beta header) changes the answer.
    hash_field(h, json.dumps(call.ingress, sort_keys=True, default=str).encode() if call.ingress else None)
    hash_field(h, call.body)
    return h.digest()


def hash_field(h: Any, value: bytes | None) -> None:
    """One field into a digest, length-prefixed (the response cache's key is built the same way)."""
    if value is None:
        h.update(b"\xff" * 8)   # absent: a length no real field has
        return
    h.update(len(value).to_bytes(8, "big"))
    h.update(value)


class Role(enum.Enum):
    LED = "led"               # this call's upstream call was shared (it may have had no followers)
    FOLLOWED = "followed"     # this call got another call's answer
    ALONE = "alone"           # this call ran on its own, neither leading nor following


@attrs.frozen
class Served:
    """What ``serve`` did for one call; the last two say what a subscriber's client got (LED, FOLLOWED)."""

    role: Role
    leader: str | None = None               # FOLLOWED: the ``flight_id`` of the call that leads the flight
    delivered: bool = False                 # the answer went out to its end (finish, or fail)
    error: GatewayError | None = None       # the error the answer ended with, if it did


_START, _SEND, _FINISH, _FAIL = range(4)


class Flight:
    """One shared upstream call: the sink its lead writes to, and the record its subscribers replay."""

    __slots__ = ("key", "leader", "streaming", "started", "finished", "status", "failed", "subscribers",
                 "_events", "_changed", "_gone")

    def __init__(self, key: bytes, leader: str, streaming: bool) -> None:
        self.key = key
        self.leader = leader
        self.streaming = streaming
        self.started = False
        self.finished = False
        self.status = 0
        self.failed: GatewayError | None = None
        self.subscribers = 0
        self._events: list[tuple[int, Any, Any]] = []
        self._changed = trio.Event()  # replaced on every record: one wake-up per event, no polling
        self._gone = trio.Event()

    @property
    def ended(self) -> bool:
        """The answer is over: finished or failed."""
        return self.finished or self.failed is not None

    @property
    def joinable(self) -> bool:
        """Joining now still gives the whole answer: a stream before its first byte, buffered until the end.

        (A flight nobody waits for any more is out of the table already.)
        """
        return not (self.ended or (self.streaming and self.started))

    # --- ResponseSink, written by the lead ------------------------------------------

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        if not self.ended:
            self.started = True
            self.status = status
            self._record(_START, status, tuple(headers))

    async def send(self, chunk: bytes) -> None:
        if not self.ended:
            self._record(_SEND, chunk, None)

    async def finish(self) -> None:
        if not self.ended:
            self.finished = True
            self._record(_FINISH, None, None)

    async def fail(self, error: GatewayError) -> None:
        self.end_with(error)

    def end_with(self, error: GatewayError) -> None:
        """Fail the answer with ``error`` unless it is over already; every subscriber gets this same object."""
        if self.ended:
            return
        self.failed = error
        if not self.started:
            self.status = error.status
        self._record(_FAIL, error, None)

    def _record(self, op: int, a: Any, b: Any) -> None:
        self._events.append((op, a, b))
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    # --- subscribers -----------------------------------------------------------------

    async def all_gone(self) -> None:
        """The lead's ``disconnected``: returns when no subscriber is left."""
        await self._gone.wait()

    def leave(self) -> bool:
        """One subscriber less; True when it was the last (the lead is told to stop)."""
        self.subscribers -= 1
        if self.subscribers:
            return False
        self._gone.set()
        return True

    async def replay(self, sink: ResponseSink) -> None:
        """Write the whole record to ``sink``, then each new event as it comes, until the answer ends."""
        at = 0
        while True:
            while at < len(self._events):
                op, a, b = self._events[at]
                at += 1
                if op == _START:
                    await sink.start(a, list(b))   # a copy each: sinks may build on the list
                elif op == _SEND:
                    await sink.send(a)
                elif op == _FINISH:
                    await sink.finish()
                    return
                else:
                    await sink.fail(a)
                    return
            await self._changed.wait()


class DedupCoordinator:
    """The table of flights by key; one per process, owned by the Runtime."""

    def __init__(self, settings: Dedup) -> None:
        self.settings = settings
        self._flights: dict[bytes, Flight] = {}
        self.counts: dict[Role, int] = {role: 0 for role in Role}   # calls served, by role (for metrics)

    def reconfigure(self, settings: Dedup) -> None:
        """New settings apply to calls that arrive from now on; flights in the air keep going."""
        self.settings = settings

    @property
    def entries(self) -> int:
        """Keys in the table now (flights that may still be joined or are still running)."""
        return len(self._flights)

    def flight(self, key: bytes) -> Flight | None:
        return self._flights.get(key)

    async def serve(self, key: bytes | None, sink: StreamingSink, disconnected: Disconnected, lead: Lead,
                    nursery: trio.Nursery, flight_id: str = "",
                    following: Callable[[], None] | None = None) -> Served:
        """Answer one call into ``sink``: lead a flight, follow one, or run ``lead`` alone.

        ``lead(sink, disconnected)`` makes the upstream call (a RequestActor's
        ``run``); ``nursery`` hosts a flight's lead and must outlive every
        client (the Runtime's). ``flight_id`` names this call to its
        followers (its request id); ``following`` is called as this call
        joins another's flight. Returns when this client's answer is out or
        its client is gone.
        """
        settings = self.settings
        flight = self._flights.get(key) if key is not None and settings.enabled else None
        if flight is not None and flight.joinable:
            role = Role.FOLLOWED
            log.debug("following the shared call of request %s", flight.leader)
            if following is not None:
                following()
        elif flight is None and key is not None and settings.enabled and len(self._flights) < settings.max_entries:
            role = Role.LED
            flight = self._flights[key] = Flight(key, flight_id, sink.streaming)
        else:
            self.counts[Role.ALONE] += 1
            await lead(sink, disconnected)
            return Served(Role.ALONE)
        self.counts[role] += 1
        # Counted before the lead task can run, so its `all_gone` cannot return early.
        flight.subscribers += 1
        if role is Role.LED:
            nursery.start_soon(self._fly, flight, lead)
        delivered = await self._subscribed(flight, sink, disconnected)
        return Served(role, flight.leader if role is Role.FOLLOWED else None, delivered,
                      flight.failed if delivered else None)

    async def _fly(self, flight: Flight, lead: Lead) -> None:
        """The shared call's task: whatever ends it, every subscriber gets an end, and the entry goes."""
        try:
            await lead(flight, flight.all_gone)
        except GatewayError as err:
            flight.end_with(err)
        except Exception:
            log.exception("the shared upstream call of request %s crashed", flight.leader)
            flight.end_with(GatewayError("Internal error in the gateway; see its log"))
        finally:
            flight.end_with(Unavailable(   # cancelled, or returned without an answer: never a hang
                "The shared upstream call for this request ended without an answer; retry",
                code="dedup_flight_ended"))
            self._drop(flight)

    async def _subscribed(self, flight: Flight, sink: ResponseSink, disconnected: Disconnected) -> bool:
        """Replay ``flight`` into ``sink`` (already counted as a subscriber); False if the client left first."""
        delivered = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch, disconnected, sink, nursery.cancel_scope)
                await flight.replay(sink)
                delivered = True
                nursery.cancel_scope.cancel()
            return delivered
        finally:
            # The client is gone, its sink broke, or its answer is out: one subscriber less either way.
            if flight.leave():
                self._drop(flight)   # nobody left: a new identical call starts afresh

    def _drop(self, flight: Flight) -> None:
        if self._flights.get(flight.key) is flight:
            del self._flights[flight.key]


async def _watch(disconnected: Disconnected, sink: ResponseSink, scope: trio.CancelScope) -> None:
    await disconnected()
    # The server reports a disconnect once a complete response is out: no client leaving.
    if not sink.finished:
        scope.cancel()
