"""DedupCoordinator: identical calls in flight share one upstream call. MockClock, exact instants.

Unit races drive ``serve`` with a fake lead; the end-to-end ones run the
real RequestActor against a simulated backend, through the coordinator.
"""

import contextlib
import json
from typing import Any, AsyncIterator

import attrs
import pytest
import trio

from switchyard.actors.call.request import RequestActor
from switchyard.actors.dedup import DedupCoordinator, Role, Served, dedup_key
from switchyard.actors.errors import GatewayError, InvalidRequest, Unavailable
from switchyard.config.schema import Dedup
from switchyard.protocol.doors.openai import parse_chat
from switchyard.protocol.http.asgi import AsgiSink, disconnect_waiter, new_request_id
from tests.harness import Reply, chat, gateway

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

ON = Dedup(enabled=True)
KEY = b"k" * 32
PIECES = [b"one ", b"two ", b"three"]


# --- a fake upstream, fake clients ------------------------------------------------------


class Sink:
    """A client's sink: what it got, and when."""

    def __init__(self, streaming: bool = False, broken: bool = False) -> None:
        self.streaming, self.broken = streaming, broken
        self.started = self.finished = False
        self.status = 0
        self.chunks: list[tuple[float, bytes]] = []
        self.error: GatewayError | None = None
        self.ended_at: float | None = None

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started, self.status = True, status

    async def send(self, chunk: bytes) -> None:
        if self.broken:
            raise OSError("the client's connection broke")
        self.chunks.append((trio.current_time(), chunk))

    async def finish(self) -> None:
        self.finished, self.ended_at = True, trio.current_time()

    async def fail(self, error: GatewayError) -> None:
        self.error, self.ended_at = error, trio.current_time()
        if not self.started:
            self.status = error.status

    @property
    def body(self) -> bytes:
        return b"".join(c for _, c in self.chunks)


class Upstream:
    """A fake lead: 1 s to the first byte, then PIECES 0.5 s apart; stops when ``disconnected`` says so."""

    def __init__(self, error: GatewayError | None = None, crash: bool = False, silent: bool = False,
                 linger: float = 0.0) -> None:
        self.error, self.crash, self.silent, self.linger = error, crash, silent, linger
        self.calls: list[float] = []       # the instants each upstream call began
        self.cancelled: list[float] = []   # the instants an upstream call was cancelled

    async def __call__(self, sink: Any, disconnected: Any) -> None:
        self.calls.append(trio.current_time())
        async with trio.open_nursery() as nursery:
            async def watch() -> None:
                await disconnected()
                if not sink.finished:
                    nursery.cancel_scope.cancel()
            nursery.start_soon(watch)
            try:
                await self._answer(sink)
            except trio.Cancelled:
                self.cancelled.append(trio.current_time())
                raise
            nursery.cancel_scope.cancel()

    async def _answer(self, sink: Any) -> None:
        await trio.sleep(1.0)
        if self.error is not None:
            await sink.fail(self.error)
            return
        if self.crash:
            raise RuntimeError("a bug in the lead")
        if self.silent:
            return
        await sink.start(200, [(b"content-type", b"application/json")])
        for i, piece in enumerate(PIECES):
            if i:
                await trio.sleep(0.5)
            await sink.send(piece)
        await sink.finish()
        await trio.sleep(self.linger)   # like a relay draining the rest of a finished body


@attrs.define
class Client:
    name: str
    at: float = 0.0
    key: bytes | None = KEY
    sink: Sink = attrs.Factory(Sink)
    leave_at: float | None = None
    served: Served | None = None
    raised: BaseException | None = None


async def crowd(coord: DedupCoordinator, lead: Upstream, *clients: Client, stop_at: float | None = None) -> None:
    """Run ``clients`` through ``coord``; flights live in a nursery of their own, like the Runtime's."""
    async def one(c: Client) -> None:
        await trio.sleep_until(c.at)

        async def disconnected() -> None:
            if c.leave_at is None:
                await trio.sleep_forever()
            await trio.sleep_until(c.leave_at)
        try:
            c.served = await coord.serve(c.key, c.sink, disconnected, lead, runtime, flight_id=c.name)
        except Exception as exc:
            c.raised = exc

    with trio.fail_after(100):   # a hang fails the test at a virtual instant
        async with hosting(stop_at) as runtime:
            async with trio.open_nursery() as ingress:
                for c in clients:
                    ingress.start_soon(one, c)


@contextlib.asynccontextmanager
async def hosting(stop_at: float | None = None) -> AsyncIterator[trio.Nursery]:
    """A nursery for the flights beside the clients' (like the Runtime's), cancelled at ``stop_at``.

    On exit it waits for the flights in it to end by themselves.
    """
    clients_done = trio.Event()

    async def host(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as runtime:
            task_status.started(runtime)
            if stop_at is not None:
                await trio.sleep_until(stop_at)
                runtime.cancel_scope.cancel()
            await clients_done.wait()

    async with trio.open_nursery() as outer:
        yield await outer.start(host)
        clients_done.set()


# --- unit races, fake lead ----------------------------------------------------------


async def test_two_identical_buffered_calls_make_one_upstream_call_and_both_get_the_same_body(autojump_clock):
    coord, up = DedupCoordinator(ON), Upstream()
    a, b = Client("a"), Client("b", at=0.4)
    await crowd(coord, up, a, b)
    assert up.calls == [0.0]
    assert a.sink.body == b.sink.body == b"".join(PIECES)
    assert a.served == Served(Role.LED, None, True, None)
    assert b.served == Served(Role.FOLLOWED, "a", True, None)
    assert a.sink.ended_at == b.sink.ended_at == 2.0
    assert coord.counts == {Role.LED: 1, Role.FOLLOWED: 1, Role.ALONE: 0}


async def test_buffered_call_joins_until_the_flight_finishes(autojump_clock):
    coord, up = DedupCoordinator(ON), Upstream(linger=1.0)
    a = Client("a")
    late = Client("late", at=1.7)   # after the first byte: a buffered call still gets the whole answer
    seen: list[tuple[float, bool]] = []

    async def probe() -> None:
        await trio.sleep_until(1.5)
        flight = coord.flight(KEY)
        seen.append((1.5, flight.joinable))
        await trio.sleep_until(2.2)   # finished (the lead lingers until 3.0): no more joins
        seen.append((2.2, flight.joinable))

    async with trio.open_nursery() as n:
        n.start_soon(probe)
        await crowd(coord, up, a, late)
    assert late.served.role is Role.FOLLOWED and late.sink.body == a.sink.body == b"".join(PIECES)
    assert [t for t, _ in late.sink.chunks] == [1.7, 1.7, 2.0]   # the record first, then live
    assert seen == [(1.5, True), (2.2, False)] and up.calls == [0.0]


async def test_lead_failure_gives_every_subscriber_the_same_error_not_a_hang(autojump_clock):
    err = InvalidRequest("no such thing")
    coord, up = DedupCoordinator(ON), Upstream(error=err)
    a, b = Client("a"), Client("b", at=0.5)
    await crowd(coord, up, a, b)
    assert a.sink.error is err and b.sink.error is err
    assert a.sink.ended_at == b.sink.ended_at == 1.0
    assert b.served == Served(Role.FOLLOWED, "a", True, err)
    assert up.calls == [0.0] and coord.entries == 0


async def test_lead_crash_fails_every_subscriber_with_one_internal_error(autojump_clock, caplog):
    coord, up = DedupCoordinator(ON), Upstream(crash=True)
    a, b = Client("a"), Client("b", at=0.5)
    await crowd(coord, up, a, b)
    assert a.sink.error is b.sink.error and a.sink.error.status == 500
    assert a.sink.ended_at == b.sink.ended_at == 1.0
    assert "crashed" in caplog.text and coord.entries == 0


async def test_lead_ending_without_an_answer_fails_its_subscribers(autojump_clock):
    coord, up = DedupCoordinator(ON), Upstream(silent=True)
    a, b = Client("a"), Client("b", at=0.5)
    await crowd(coord, up, a, b)
    assert isinstance(a.sink.error, Unavailable) and a.sink.error is b.sink.error
    assert a.sink.error.code == "dedup_flight_ended" and b.sink.ended_at == 1.0


async def test_shutdown_of_the_hosting_nursery_ends_every_subscriber(autojump_clock):
    coord, up = DedupCoordinator(ON), Upstream()
    a, b = Client("a"), Client("b", at=0.5)
    await crowd(coord, up, a, b, stop_at=1.2)
    assert up.cancelled == [1.2]
    assert a.sink.body == b.sink.body == b"one "
    assert isinstance(a.sink.error, Unavailable) and a.sink.error is b.sink.error and b.sink.ended_at == 1.2


async def test_broken_follower_sink_leaves_and_the_others_are_unaffected(autojump_clock):
    coord, up = DedupCoordinator(ON), Upstream()
    a, b = Client("a"), Client("b", at=0.5, sink=Sink(broken=True))
    await crowd(coord, up, a, b)
    assert b.raised is not None and b.served is None
    assert a.sink.body == b"".join(PIECES) and up.cancelled == [] and coord.entries == 0


async def test_key_none_runs_alone(autojump_clock):
    coord, up = DedupCoordinator(ON), Upstream()
    a, b = Client("a", key=None), Client("b", at=0.5, key=None)
    await crowd(coord, up, a, b)
    assert a.served == b.served == Served(Role.ALONE)
    assert up.calls == [0.0, 0.5] and coord.entries == 0


async def test_disabled_runs_alone_and_reconfigure_applies_to_new_calls(autojump_clock):
    coord, up = DedupCoordinator(Dedup(enabled=False)), Upstream()
    a, b = Client("a"), Client("b", at=0.5)
    await crowd(coord, up, a, b)
    assert a.served.role is b.served.role is Role.ALONE and len(up.calls) == 2
    coord.reconfigure(ON)
    c, d = Client("c", at=10), Client("d", at=10.5)
    await crowd(coord, up, c, d)
    assert (c.served.role, d.served.role) == (Role.LED, Role.FOLLOWED) and len(up.calls) == 3


async def test_table_full_runs_alone_but_an_existing_flight_is_still_joined(autojump_clock):
    coord, up = DedupCoordinator(Dedup(enabled=True, max_entries=1)), Upstream()
    a = Client("a")
    other = Client("other", at=0.5, key=b"o" * 32)   # a new key, with no room for it
    b = Client("b", at=0.5)                          # the key already in the table: no new entry needed
    await crowd(coord, up, a, other, b)
    assert other.served == Served(Role.ALONE)
    assert b.served.role is Role.FOLLOWED and b.sink.body == a.sink.body
    assert up.calls == [0.0, 0.5]


async def test_table_entry_is_gone_after_the_flight(autojump_clock):
    coord, up = DedupCoordinator(ON), Upstream(linger=1.0)
    entries: list[tuple[float, int]] = []

    async def watch() -> None:
        for t in (0.5, 2.5, 3.5):
            await trio.sleep_until(t)
            entries.append((t, coord.entries))

    async with trio.open_nursery() as n:
        n.start_soon(watch)
        await crowd(coord, up, Client("a"), Client("b", at=0.2))
    assert entries == [(0.5, 1), (2.5, 0), (3.5, 0)]   # gone once every client has its answer
    assert coord.flight(KEY) is None


# --- end to end: the real RequestActor against a simulated backend ------------------------

GATEWAY = """
health_checks: {interval: 1h}
dedup: {enabled: true, max_entries: 4}
backends:
  - name: sim
    type: simulated
    models: [demo]
    simulation: {latency: 1s, tokens_per_second: 2, chunks: 4FAILURE}
"""


async def post(app: Any, coord: DedupCoordinator, nursery: trio.Nursery, body: dict, *, at: float = 0.0,
               disconnect_at: float | None = None) -> tuple[Reply, Served]:
    """One /v1/chat/completions call through ``coord`` (what App.chat_completions does with dedup on)."""
    await trio.sleep_until(at)
    runtime, reply = app.runtime, Reply()

    async def receive() -> dict[str, Any]:
        if disconnect_at is None:
            await trio.sleep_forever()
        await trio.sleep_until(disconnect_at)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            reply.status, reply.headers = message["status"], dict(message["headers"])
        elif message["type"] == "http.response.body":
            if message.get("body"):
                reply.chunks.append((trio.current_time(), message["body"]))
            if not message.get("more_body", False):
                reply.ended_at = trio.current_time()

    call = parse_chat(json.dumps(body).encode(), runtime.snapshot, {}, new_request_id())
    actor = RequestActor(runtime, call)
    actor.admit()
    key = dedup_key(actor.call, None, actor.model)
    served = await coord.serve(key, AsgiSink(send, call.stream), disconnect_waiter(receive), actor.run, nursery,
                               flight_id=call.request_id)
    return reply, served


async def together(app: Any, coord: DedupCoordinator, *calls: dict) -> list[tuple[Reply, Served]]:
    """Run ``post`` for each call's kwargs at once; a nursery of the test's own hosts the flights."""
    out: list[Any] = [None] * len(calls)

    async def one(i: int, kw: dict) -> None:
        out[i] = await post(app, coord, runtime, **kw)

    with trio.fail_after(100):
        async with hosting() as runtime:
            async with trio.open_nursery() as ingress:
                for i, kw in enumerate(calls):
                    ingress.start_soon(one, i, kw)
    return out


def sim_of(app: Any) -> Any:
    return app.runtime.upstream.simulated["sim.simulated"]


async def test_real_identical_buffered_calls_share_one_upstream_call(autojump_clock):
    async with gateway(GATEWAY.replace("FAILURE", "")) as app:
        coord = DedupCoordinator(app.runtime.snapshot.dedup)
        (a, led), (b, followed) = await together(app, coord, {"body": chat()}, {"body": chat(), "at": 0.3})
        assert sim_of(app).count("request") == 1
        assert a.status == b.status == 200 and a.body == b.body and a.ended_at == b.ended_at == 2.5
        assert led.role is Role.LED and followed.role is Role.FOLLOWED and followed.leader.startswith("req_")
        assert coord.entries == 0


async def test_streaming_follower_joining_before_the_first_byte_gets_the_full_stream(autojump_clock):
    async with gateway(GATEWAY.replace("FAILURE", "")) as app:
        coord = DedupCoordinator(app.runtime.snapshot.dedup)
        (a, _), (b, followed) = await together(app, coord, {"body": chat(stream=True)},
                                               {"body": chat(stream=True), "at": 0.9})
        assert followed.role is Role.FOLLOWED and sim_of(app).count("request") == 1
        assert b.body == a.body and b.events()[-1] == b"[DONE]"
        assert b.headers[b"content-type"] == b"text/event-stream"
        assert [t for t, c in b.chunks if b'"content"' in c] == [1.0, 1.5, 2.0, 2.5]


async def test_streaming_call_arriving_after_the_first_byte_runs_on_its_own(autojump_clock):
    async with gateway(GATEWAY.replace("FAILURE", "")) as app:
        coord = DedupCoordinator(app.runtime.snapshot.dedup)
        (a, led), (b, alone) = await together(app, coord, {"body": chat(stream=True)},
                                              {"body": chat(stream=True), "at": 1.2})
        assert led.role is Role.LED and alone.role is Role.ALONE
        assert sim_of(app).count("request") == 2
        assert [t for t, c in b.chunks if b'"content"' in c] == [2.2, 2.7, 3.2, 3.7]
        assert b.events()[-1] == a.events()[-1] == b"[DONE]"


async def test_leader_client_leaving_first_never_loses_the_follower_answer(autojump_clock):
    async with gateway(GATEWAY.replace("FAILURE", "")) as app:
        coord = DedupCoordinator(app.runtime.snapshot.dedup)
        (a, led), (b, followed) = await together(app, coord, {"body": chat(stream=True), "disconnect_at": 1.2},
                                                 {"body": chat(stream=True), "at": 0.5})
        assert [t for t, _ in a.chunks] == [1.0] and not led.delivered
        assert followed.delivered and b.events()[-1] == b"[DONE]"
        assert [t for t, c in b.chunks if b'"content"' in c] == [1.0, 1.5, 2.0, 2.5]
        assert sim_of(app).count("cancelled") == 0 and sim_of(app).count("completed") == 1


async def test_follower_leaving_first_leaves_the_leader_unaffected(autojump_clock):
    async with gateway(GATEWAY.replace("FAILURE", "")) as app:
        coord = DedupCoordinator(app.runtime.snapshot.dedup)
        (a, led), (b, followed) = await together(app, coord, {"body": chat(stream=True)},
                                                 {"body": chat(stream=True), "at": 0.5, "disconnect_at": 1.7})
        assert [t for t, _ in b.chunks] == [1.0, 1.5] and not followed.delivered
        assert led.delivered and a.events()[-1] == b"[DONE]" and a.ended_at == 2.5
        assert sim_of(app).count("cancelled") == 0


async def test_all_clients_gone_cancels_the_upstream_call_at_that_instant(autojump_clock):
    async with gateway(GATEWAY.replace("FAILURE", "")) as app:
        coord = DedupCoordinator(app.runtime.snapshot.dedup)
        sim = sim_of(app)
        await together(app, coord, {"body": chat(stream=True), "disconnect_at": 1.2},
                       {"body": chat(stream=True), "at": 0.5, "disconnect_at": 1.7})
        assert [t for t, k in sim.events if k == "cancelled"] == [1.7]
        assert coord.entries == 0 and app.runtime.pool.in_flight["sim"] == 0
        # the next identical call starts afresh, not on the cancelled one
        ((c, led),) = await together(app, coord, {"body": chat(stream=True), "at": 1.7})
        assert led.role is Role.LED and c.events()[-1] == b"[DONE]" and sim.count("request") == 2


async def test_real_upstream_error_reaches_every_subscriber(autojump_clock):
    async with gateway(GATEWAY.replace("FAILURE", ", failure: {status: 400}")) as app:
        coord = DedupCoordinator(app.runtime.snapshot.dedup)
        (a, led), (b, followed) = await together(app, coord, {"body": chat()}, {"body": chat(), "at": 0.5})
        assert a.status == b.status == 400 and a.body == b.body and a.ended_at == b.ended_at == 1.0
        assert led.error is followed.error and followed.error.status == 400
        assert sim_of(app).count("request") == 1 and coord.entries == 0


# --- the key -------------------------------------------------------------------------------


async def test_key_covers_revision_api_key_model_pin_stream_hash_key_and_body():
    async with gateway(GATEWAY.replace("FAILURE", "")) as app:
        snap = app.runtime.snapshot
        call = parse_chat(json.dumps(chat()).encode(), snap, {}, "req_1")
        base = dedup_key(call, None)
        assert dedup_key(attrs.evolve(call, request_id="req_2"), None) == base   # the request id is not in it
        assert dedup_key(call, "") != dedup_key(call, "k1") != dedup_key(call, "k2")
        variants = [
            attrs.evolve(call, snapshot=attrs.evolve(snap, revision=snap.revision + "x")),
            attrs.evolve(call, model="other"),
            attrs.evolve(call, pin="sim"),
            attrs.evolve(call, stream=True),
            attrs.evolve(call, hash_key="session-1"),
            attrs.evolve(call, body=call.body + b" "),
        ]
        keys = {base, dedup_key(call, None, "canonical")} | {dedup_key(v, None) for v in variants}
        assert len(keys) == 2 + len(variants)
