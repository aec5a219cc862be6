"""The one shared httpx client, and how each backend is addressed.

One ``httpx.AsyncClient`` serves every backend so keep-alive connections are
pooled process-wide (sized by ``server.connection_pool_size``). The pool is
Switchyard's own transport (``protocol/wires/transport.py``): httpx's default one
costs more per request the more connections it holds open. Simulated
backends are reached through the same client: a dispatching transport hands
requests for their ``*.simulated`` hosts to in-process transports, so the
request path is identical for real and simulated backends.

httpx limits are per operation; only the connect limit is set here. Every
other budget is a Trio cancel scope owned by the caller.
"""

from __future__ import annotations

import base64
import functools
from typing import Mapping
from urllib.parse import urlsplit

import httpx

from switchyard.actors import hops
from switchyard.config.kinds import kind_of
from switchyard.config.kinds.base import Api, InProcess
from switchyard.config.schema import BackendConfig, Snapshot
from switchyard.protocol.simulated.anthropic import SimulatedAnthropicTransport
from switchyard.protocol.simulated.openai import SimulatedTransport
from switchyard.protocol.wires.transport import PooledTransport
from switchyard.protocol.wires.upstream_errors import map_upstream_exceptions


@functools.lru_cache(maxsize=1024)
def basic_auth(url: httpx.URL) -> tuple[str, str] | None:
    """The ``Authorization: Basic`` header a ``user:password@`` URL asks for; None without userinfo."""
    if not (url.username or url.password):
        return None
    token = base64.b64encode(f"{url.username}:{url.password}".encode()).decode("ascii")
    return ("authorization", "Basic " + token)


@functools.lru_cache(maxsize=1024)
def _addressed(url: httpx.URL) -> tuple[tuple[str, str] | None, tuple[bytes, bytes]]:
    """What a request to ``url`` always carries: its Basic credentials (or None) and its Host header."""
    return basic_auth(url), (b"host", url.netloc)


# The in-process simulator of each wire API a kind may be simulated in (Kind.in_process; tests/unit/test_kinds.py).
SIMULATORS: Mapping[Api, type[SimulatedTransport]] = {
    Api.OPENAI: SimulatedTransport,               # simulated, and azure on a *.simulated host
    Api.MESSAGES: SimulatedAnthropicTransport,    # anthropic on a *.simulated host
}


def in_process(backend: BackendConfig) -> bool:
    """Served by an in-process simulator (its kind's ``in_process``): a simulated backend, or an anthropic
    or azure one on a ``*.simulated`` host."""
    if backend.simulation is None:
        return False
    where = kind_of(backend).in_process
    return where is InProcess.ALWAYS or (
        where is InProcess.SIMULATED_HOST and (urlsplit(backend.url).hostname or "").endswith(".simulated"))


def simulator_for(backend: BackendConfig) -> SimulatedTransport:
    assert backend.simulation is not None
    sim = SIMULATORS[kind_of(backend).api](backend.name, backend.simulation, backend.models)
    _keyed(sim, backend)
    return sim


def _fits(sim: SimulatedTransport, backend: BackendConfig) -> bool:
    """Whether ``sim`` simulates ``backend``'s wire API: its simulator's class, and none more specific."""
    wanted = SIMULATORS[kind_of(backend).api]
    return isinstance(sim, wanted) and not any(
        isinstance(sim, other) for other in SIMULATORS.values() if other is not wanted and issubclass(other, wanted))


def _keyed(sim: SimulatedTransport, backend: BackendConfig) -> None:
    if isinstance(sim, SimulatedAnthropicTransport):   # it checks the key it is sent (x-api-key)
        sim.api_key = backend.api_key


USER_AGENT = ("user-agent", "switchyard")


class DispatchTransport(httpx.AsyncBaseTransport):
    """Sends ``*.simulated`` hosts to in-process transports, the rest to the network."""

    def __init__(self, network: httpx.AsyncBaseTransport, simulated: dict[str, SimulatedTransport]) -> None:
        self.network = network
        self.simulated = simulated  # shared with Upstream, so a reload can add simulators

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sim = self.simulated.get(request.url.host) if self.simulated else None
        if sim is not None:
            return await sim.handle_async_request(request)
        return await self.network.handle_async_request(request)

    async def aclose(self) -> None:
        await self.network.aclose()


class Upstream:
    def __init__(self, snapshot: Snapshot, simulated: Mapping[str, SimulatedTransport] | None = None) -> None:
        pool = snapshot.server.connection_pool_size
        network = PooledTransport(
            httpx.Limits(max_connections=pool, max_keepalive_connections=pool, keepalive_expiry=30.0))
        if simulated is None:
            simulated = {urlsplit(b.url).hostname or b.name: simulator_for(b)
                         for b in snapshot.backends if in_process(b)}
        self.simulated: dict[str, SimulatedTransport] = dict(simulated)
        self.transport = DispatchTransport(network, self.simulated)
        timeout = httpx.Timeout(connect=snapshot.timeouts.connection, read=None, write=None, pool=None)
        self._timeout = timeout.as_dict()
        # Health checks, discovery and engine stats are no call's: their hop count starts at 1.
        self.client = httpx.AsyncClient(transport=self.transport, timeout=timeout, follow_redirects=False,
                                        headers=[hops.FIRST])

    def request(self, method: str, url: httpx.URL, headers: list[tuple[str, str]], content: bytes) -> httpx.Request:
        """A request for ``send``, carrying the client's timeouts (and, like the client, the
        Basic credentials of a ``user:password@`` URL, which win over any other authorization).

        ``headers`` never name host or content-length: they are set here. The
        body is handed over as a stream with both already set, which spares
        httpx its content encoding and header preparation (about 12 µs a call).
        """
        basic, host = _addressed(url)
        if not any(name == hops.HEADER for name, _ in headers):   # a call's attempt sets its own count
            headers = [*headers, hops.FIRST]
        if basic is not None:
            headers = [h for h in headers if h[0].lower() != "authorization"] + [basic]
        # httpx takes each header as str or bytes; its annotation wants one kind per list
        request = httpx.Request(method, url, headers=[host, *headers, USER_AGENT,  # type: ignore[arg-type]
                                                      (b"content-length", str(len(content)).encode())],
                                stream=httpx.ByteStream(content), extensions={"timeout": self._timeout})
        request.read()   # the body is in memory already: readable as request.content, as with content=
        return request

    @staticmethod
    def errors(backend: str) -> map_upstream_exceptions:
        """A context that turns this client's transport failures into the taxonomy, naming ``backend``:
        around a send and everything that reads its answer."""
        return map_upstream_exceptions(backend)

    async def send(self, request: httpx.Request) -> httpx.Response:
        """``request`` straight to the transport, its response unread (the caller closes it).

        The chat path needs none of what ``AsyncClient.send`` adds on top (auth
        flows, redirects, cookies, event hooks), and skipping it saves about
        60 µs a call; health checks, discovery and engine stats use ``client``."""
        return await self.transport.handle_async_request(request)

    def sync_simulated(self, snapshot: Snapshot) -> None:
        """After a reload: a simulator for each new simulated backend; changed ones take their new behaviour."""
        for b in snapshot.backends:
            if in_process(b):
                host = urlsplit(b.url).hostname or b.name
                sim = self.simulated.get(host)
                if sim is None or not _fits(sim, b):
                    self.simulated[host] = simulator_for(b)
                else:
                    assert b.simulation is not None   # an in-process backend is loaded with one (simulator_for)
                    sim.simulation = b.simulation
                    sim.models = tuple(m for m in b.models if not any(c in m for c in "*?["))
                    _keyed(sim, b)

    def simulator(self, backend: BackendConfig) -> SimulatedTransport | None:
        return self.simulated.get(urlsplit(backend.url).hostname or "")

    async def aclose(self) -> None:
        await self.client.aclose()
