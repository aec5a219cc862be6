"""The Redis limiter's own connections (``redis_wire``) and settles riding with admissions, against a
real Redis (``tests/redis.py``): logging in, the database, TLS, NOSCRIPT, a cancelled command's
connection never reused, and one script call carrying a settle and the next admission; a claim sent
again after its answer was lost."""

from __future__ import annotations

import ssl
import subprocess

import coredis.exceptions
import pytest
import trio
import trio.lowlevel

from switchyard.actors.limits.tickets import Ticket
from switchyard.actors.routing import limits as core
from switchyard.config.load import load_text
from switchyard.protocol.stores import redis_settles
from switchyard.protocol.stores.redis_limits import FALLBACK_ORIGIN
from switchyard.protocol.stores.redis_ops import RedisUnavailable, Scripts
from switchyard.protocol.stores.redis_script import SCRIPTS, Plan, batch, claim_part
from switchyard.protocol.stores.redis_wire import Address, Connection, RedisWire
from tests import redis
from tests.servers import free_port
from tests.unit.test_redis_limits import WALL, Clock, demand, snapshot, start

redis_server, redis_url = redis.redis_server, redis.redis_url   # the fixtures this module uses


def script_calls(wire_url: str) -> int:
    """EVALSHA calls the server has run so far (INFO commandstats)."""
    host, port = wire_url.split("//")[1].split("/")[0].split(":")
    return int(subprocess.run(["redis-cli", "-h", host, "-p", port, "INFO", "commandstats"], capture_output=True,
                              text=True, check=True).stdout.partition("cmdstat_evalsha:calls=")[2].partition(",")[0]
               or 0)


async def test_a_settle_rides_with_the_next_admission_in_one_script_call_applied_before_it(nursery, redis_url):
    snap = snapshot("{max_concurrent: 1}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    first = await limiter.admit(demand(snap, "a"))
    before = script_calls(redis_url)
    limiter.settle(first.ticket, 10, None)
    second = await limiter.admit(demand(snap, "b"))   # the slot "a" held is free when "b" is decided
    assert second.refusal is None
    assert script_calls(redis_url) - before == 1
    assert limiter.settled == 1 and limiter.queued_settles == 0


async def test_a_settle_with_no_admission_to_ride_with_is_sent_alone_after_the_ride_wait(nursery, redis_url):
    snap = snapshot("{max_concurrent: 1}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    first = await limiter.admit(demand(snap, "a"))
    limiter.settle(first.ticket, 10, None)
    await trio.sleep(redis_settles.RIDE_WAIT / 2)
    assert limiter.settled == 0
    with trio.fail_after(5):
        while limiter.settled == 0:
            await trio.sleep(0.001)
    assert limiter.queued_settles == 0


async def test_settles_that_rode_with_an_admission_redis_did_not_answer_go_back_to_the_queue(
        nursery, redis_server, redis_url):
    snap = snapshot("{max_concurrent: 5}")
    limiter = await start(nursery, redis_url, snap, clock=Clock(), timeout=0.2)
    first = await limiter.admit(demand(snap, "a"))
    limiter.settle(first.ticket, 10, None)
    redis_server.pause()
    try:
        await limiter.admit(demand(snap, "b"))   # carries the settle; no answer: the share decides
        # the settle of "a" is queued again, with the release of what "b" may hold in Redis
        assert [item[0].demand.call_id for item in limiter._settles._queue] == ["a", "b"]
        assert limiter.settled == 0
    finally:
        redis_server.resume()
    with trio.fail_after(10):
        while limiter.settled < 2:
            await trio.sleep(0.01)


async def test_a_command_cancelled_half_way_never_leaves_its_connection_for_the_next(redis_url):
    wire = RedisWire(Address(redis_url))
    try:
        await wire.warm(1)   # open before the clock starts: the cancel falls on the command, not the connect
        with trio.move_on_after(0.05):
            await wire.call("BLPOP", "nothing-here", "2")   # cancelled while Redis holds it
        await wire.call("RPUSH", "nothing-here", "late")
        assert await wire.call("PING") == "PONG"            # not the BLPOP's late reply
        assert wire.opened == 2
    finally:
        await wire.aclose()


async def test_a_restarted_redis_is_answered_by_the_next_call(redis_server, redis_url):
    wire = RedisWire(Address(redis_url))
    try:
        await wire.warm(3)
        redis_server.stop()
        redis_server.start()
        with trio.fail_after(5):   # the idle connections see the restart's close: none is used
            while not all(c.closed_while_idle() for c in wire._idle):
                await trio.sleep(0.01)
        assert await wire.call("PING") == "PONG"
        assert wire.opened == 4
    finally:
        await wire.aclose()


async def test_an_idle_connection_the_server_closed_is_replaced_before_use_not_failed_on(redis_url):
    admin, wire = RedisWire(Address(redis_url)), RedisWire(Address(redis_url))
    try:
        await wire.warm(2)
        await admin.call("CLIENT", "KILL", "SKIPME", "yes")   # every other client: the wire's idle ones
        with trio.fail_after(5):
            while not all(c.closed_while_idle() for c in wire._idle):
                await trio.sleep(0.01)
        assert await wire.call("PING") == "PONG"
        assert wire.opened == 3 and len(wire._idle) == 1
    finally:
        await wire.aclose()
        await admin.aclose()


async def test_the_wire_logs_in_with_the_urls_user_and_password_and_selects_its_database(redis_url):
    admin = RedisWire(Address(redis_url))
    host_port = redis_url.split("//")[1].split("/")[0]
    await admin.call("ACL", "SETUSER", "limiter", "on", ">s3cret:pass", "~*", "+@all")
    wire = RedisWire(Address(f"redis://limiter:s3cret%3Apass@{host_port}/3"))
    try:
        await wire.call("SET", "where", "db3")
        await admin.call("SELECT", "3")
        assert await admin.call("GET", "where") == "db3"
        with pytest.raises(Exception, match="WRONGPASS|invalid username-password"):
            await RedisWire(Address(f"redis://limiter:wrong@{host_port}/0")).call("PING")
    finally:
        await admin.call("ACL", "DELUSER", "limiter")
        await admin.call("FLUSHALL")
        await wire.aclose()
        await admin.aclose()


async def test_a_script_redis_lost_is_loaded_again_on_noscript(redis_url):
    scripts = Scripts(RedisWire(Address(redis_url)), 2.0)
    try:
        await scripts.wire.call("SCRIPT", "FLUSH")
        assert await scripts.op("view", [], ["5", '{"t":[],"l":[],"b":[]}']) == ["5"]
    finally:
        await scripts.wire.aclose()


async def test_an_unreachable_redis_is_unavailable_naming_the_cause():
    scripts = Scripts(RedisWire(Address(f"redis://127.0.0.1:{free_port()}/0")), 2.0)
    with pytest.raises(RedisUnavailable, match="Connect|refused|OSError"):
        await scripts.op("view", [], ["5", '{"t":[],"l":[],"b":[]}'])


def test_every_script_is_sent_by_its_sha1():
    import hashlib

    scripts = Scripts(RedisWire(Address("redis://127.0.0.1:1/0")), 1.0)
    assert scripts._sha == {name: hashlib.sha1(text.encode()).hexdigest() for name, text in SCRIPTS.items()}


@pytest.mark.parametrize("url, rule", [
    ("redis://cache:6379/0?ssl_cert_reqs=none", "takes no query options"),
    ("redis://cache:6379/zero", "the path is the database number"),
    ("redis://cache:65536/0", "the port is a number up to 65535"),
    ("redis://cache:port/0", "the port is a number up to 65535"),
    ("redis://:6379/0", "must be a redis:// or rediss:// URL with a host"),
])
def test_state_redis_url_takes_a_database_number_and_no_query_options(url, rule):
    with pytest.raises(Exception) as caught:
        load_text(f"state: {{redis_url: '{url}'}}\n", env={})
    assert f"state.redis_url: {rule}" in str(caught.value)


async def test_rediss_speaks_tls_verified_against_the_ca_in_ssl_cert_file(tmp_path, monkeypatch):
    cert, key = tmp_path / "redis.crt", tmp_path / "redis.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    port = free_port()
    server = subprocess.Popen([redis.redis_binary(), "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                               "--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-auth-clients", "no",
                               "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        wire = RedisWire(Address(f"rediss://127.0.0.1:{port}/0"))
        with trio.fail_after(10):
            while True:
                try:
                    assert await wire.call("PING") == "PONG"
                    break
                except OSError:
                    await trio.sleep(0.05)
        await wire.aclose()
        monkeypatch.delenv("SSL_CERT_FILE")
        untrusted = RedisWire(Address(f"rediss://127.0.0.1:{port}/0"), ssl.create_default_context(cafile=None))
        with pytest.raises(trio.BrokenResourceError):
            await untrusted.call("PING")
    finally:
        server.kill()
        server.wait()


async def test_a_reply_that_is_not_resp_never_leaves_its_connection_for_the_next():
    """The parser's protocol error is a RedisError too, but unlike an error reply it was not read whole:
    the connection is closed, not kept idle."""
    client, server = (trio.SocketStream(s) for s in trio.socket.socketpair())
    wire = RedisWire(Address("redis://127.0.0.1/0"))
    wire._idle.append(Connection(client))

    async def answer_garbage() -> None:
        await server.receive_some(1024)   # the PING
        await server.send_all(b"?not resp\r\n+PONG\r\n")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_garbage)
        with pytest.raises(coredis.exceptions.InvalidResponse):
            await wire.call("PING")
    assert wire._idle == []
    with pytest.raises(trio.ClosedResourceError):
        await client.send_all(b"x")
    await server.aclose()


async def test_a_connection_warm_opened_is_closed_when_its_ping_is_cancelled(monkeypatch):
    client, server = (trio.SocketStream(s) for s in trio.socket.socketpair())
    wire = RedisWire(Address("redis://127.0.0.1/0"))

    async def opened() -> Connection:
        return Connection(client)

    monkeypatch.setattr(wire, "_open", opened)
    with trio.move_on_after(0.05):
        await wire.warm(1)   # the server side never answers the PING
    assert wire._idle == []
    with pytest.raises(trio.ClosedResourceError):
        await client.send_all(b"x")
    await server.aclose()


async def test_a_claim_sent_again_after_its_answer_was_lost_reserves_the_budget_once(nursery, redis_url):
    snap = snapshot(key_extra="    budget: {limit_usd: 1.0}")
    limiter = await start(nursery, redis_url, snap, clock=Clock())
    assert (await limiter.admit(demand(snap, "seed"))).refusal is None   # the budget counter is in Redis
    d = demand(snap, "c1", worst_usd=0.5)
    ticket = Ticket(d, Plan(d, WALL).bucket_names, 0.0, FALLBACK_ORIGIN)   # admitted by the local share
    keys, args = batch([limiter._now(), str(core.LEASE_SECONDS)], [claim_part(ticket, 0.0, None)])
    for _ in range(2):   # the first claim's answer was lost: the probe's next round sends it again
        await limiter._scripts.op("claim", keys, args)
    assert (await limiter.key_view("team-a"))["budget"]["reserved_usd"] == pytest.approx(0.5)
    limiter._settles.tell((ticket, 100, 0.4))
    assert await limiter.flush()
    view = (await limiter.key_view("team-a"))["budget"]
    assert (view["spent_usd"], view["reserved_usd"]) == (pytest.approx(0.4), pytest.approx(0.0))


async def test_a_client_leaving_an_admission_that_carries_settles_never_makes_them_count_twice(
        nursery, redis_server, redis_url):
    """Cut off, the script call's settles would go back to the queue though Redis runs them: the call is
    read to its end (or its bound), and the caller then hears its cancellation."""
    snap = snapshot(key_extra="    budget: {limit_usd: 10.0}")
    limiter = await start(nursery, redis_url, snap, clock=Clock(), timeout=2.0)
    first = await limiter.admit(demand(snap, "a", worst_usd=0.5))

    async def resume_later() -> None:
        await trio.sleep(0.15)
        redis_server.resume()

    redis_server.pause()
    nursery.start_soon(resume_later)
    limiter.settle(first.ticket, 100, 0.3)
    with trio.move_on_after(0.05) as left:
        await limiter.admit(demand(snap, "b", worst_usd=0.5))   # carries the settle; the client leaves
        await trio.lowlevel.checkpoint()
    assert left.cancelled_caught
    assert await limiter.flush(5.0)
    view = (await limiter.key_view("team-a"))["budget"]
    assert (view["spent_usd"], view["reserved_usd"]) == (pytest.approx(0.3), pytest.approx(0.0))


async def test_a_riding_settle_or_admission_whose_spec_is_not_json_fails_alone(redis_url):
    """Nothing that can fail the whole admit script runs after its riding settles are applied (the
    limiter would send them again): a malformed settle or admission spec is that call's error only."""
    from switchyard.actors.routing import limits as core
    from switchyard.protocol.stores.redis_script import CALLS, Plan, batch

    snap = snapshot("{requests_per_minute: 100}")
    scripts = Scripts(RedisWire(Address(redis_url)), 2.0)
    try:
        good = Plan(demand(snap, "good"), 0.0).part()
        bad_settle = (["sy:{sy}:inflight", "sy:{sy}:call:x"], ["x", "0", "", "{not json"])
        bad_admit = (good[0], ["bad", "{not json", ""])
        keys, args = batch(["1000", str(core.LEASE_SECONDS), CALLS, "1"], [bad_settle, bad_admit, good])
        admitted, settled = await scripts.op("admit", keys, args)
        assert isinstance(settled[0], str)                       # the settle's own error
        assert admitted[0][0] == "error" and admitted[1][0] == "ok"
    finally:
        await scripts.wire.aclose()
