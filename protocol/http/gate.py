"""The gate every door passes: who asks, then whether it may come in now; counted while it is in.

Two steps, because the HTTP doors look at the path and read the body
between them:

- ``Gate.identify`` at the edge: on the data plane, the hop guard (a loop is
  refused whoever sends it), then the API key, asked before the path is
  looked at (no route map for strangers). Its answer is the request's
  ``Identity``, one frozen value built once: the request id, the route, the
  key and the revision it was judged under, the hop count, the trace
  context, the client. Before the runtime is up nobody is judged:
  ``admit`` refuses.
- ``Gate.admit`` once the door knows what is asked: the runtime up, not
  draining, the body read when there is one (a client still uploading
  holds no slot, and the drain may begin meanwhile, so it is asked again),
  then ``server.max_concurrent_requests``. Its answer is a ``Passage``,
  entered at once: from ``with`` to its end the request counts against the
  cap and, for a websocket session, is one of ``Runtime.calls``, which a
  drain waits for and ends; it is counted out however it ends. (An HTTP
  call's RequestActor is in ``Runtime.calls`` itself, while it runs.)
  ``admit`` raises before anything is counted, so a websocket door answers
  the refusal of its handshake apart from the errors of its open session.

A refusal is raised as a ``GatewayError``; each door answers it in its own
shape. A call that runs on a later revision than its key was judged under
(a reload while its body came, or a socket's later turn) has its key judged
again by that revision: ``Identity.key_now``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import attrs
from attrs import frozen

from switchyard.actors import log_fields
from switchyard.actors.call.pipeline import Arrival
from switchyard.actors.control.view import invalid
from switchyard.actors.errors import AuthenticationError, ShuttingDown, TooManyConcurrentRequests, Unavailable
from switchyard.actors.hops import inbound_hops
from switchyard.protocol.http import limits
from switchyard.protocol.http.auth import DATA_PLANE_PREFIXES, judge, settled
from switchyard.protocol.http.failed_auth import FailedAuth

if TYPE_CHECKING:
    from switchyard.actors.control.plane import ControlPlane
    from switchyard.actors.control.records import KeyRecord
    from switchyard.actors.runtime import Runtime
    from switchyard.actors.timing import Timing
    from switchyard.actors.trace import TraceContext
    from switchyard.config.access import ApiKey
    from switchyard.config.schema import ServerConfig, Snapshot
    from switchyard.protocol.http.asgi import Scope

Headers = list[tuple[bytes, bytes]]

# Where a refused call or session should go instead, when the server drains.
CALL = "send this call to another instance"
SESSION = "open this session on another instance"
SOCKET = "open this socket on another instance"


@frozen
class Identity:
    """Who a request is, settled at the edge. ``revision`` is the Snapshot its key was judged under: None
    when nobody was judged (off the data plane, or before the runtime was up)."""

    request_id: str
    route: str                                       # the path it came to (a call's route label)
    headers: Headers = attrs.field(repr=False)
    peer: Any = None                                 # ASGI's ``client``: (host, port), None over a Unix socket
    key: "ApiKey | None" = None
    revision: "Snapshot | None" = attrs.field(default=None, repr=False, eq=False)
    hops: int = 0                                    # gateways passed before this one (actors/hops.py)
    trace: "TraceContext | None" = None
    credentials: Headers = attrs.field(repr=False)   # where the key was read (a browser's subprotocol too)
    control: "ControlPlane | None" = attrs.field(default=None, repr=False, eq=False)   # database keys' judge
    record: "KeyRecord | None" = attrs.field(default=None, repr=False, eq=False)   # a database key's, as judged
    # The ledger's purpose: "batch" for a batch line, which the gateway calls in process
    # (protocol/doors/batch_lines.py) with its owner's key looked up by id; a client's is always "client".
    purpose: str = "client"

    @credentials.default
    def _headers(self) -> Headers:
        return self.headers

    def key_now(self, snapshot: "Snapshot") -> "ApiKey | None":
        """The key as ``snapshot`` judges it: the one judged at the edge when that was this revision, else
        asked again (a key revoked by a reload meanwhile is a 401, one narrowed is the narrower key). A batch
        line has no secret to judge again: its key is the one its runner looked up as the line began."""
        if snapshot is self.revision or self.purpose != "client":
            return self.key
        judged = judge(self.credentials, snapshot.api_keys, self.control)
        if judged.lookup:   # a database key the view knew at the edge and no longer does (deleted)
            raise invalid()
        return judged.key

    def client_ip(self, trusted_proxies: tuple[str, ...]) -> str:
        return limits.client_ip(self.peer, self.headers, trusted_proxies)

    def client_address(self, trusted_proxies: tuple[str, ...]) -> Callable[[], str] | None:
        """``client_ip``, to call when needed (a circuit's failure asks, not every call); None when the peer
        has no address (a Unix socket, an in-process test)."""
        return functools.partial(limits.client_ip, self.peer, self.headers, trusted_proxies) if self.peer else None

    def arrival(self, snapshot: "Snapshot", in_flight: int, request_id: str | None = None,
                timing: "Timing | None" = None) -> Arrival:
        """The pipeline's ``Arrival`` for a call on ``snapshot`` (its key judged by it); ``request_id``: the
        call's own when it is not the request's (a socket's turn); ``timing``: the request's (Server-Timing)."""
        key = self.key_now(snapshot)
        trusted = snapshot.server.trusted_proxies
        per_ip = snapshot.rate_limiting.per_client_ip is not None
        return Arrival(snapshot, key, self.trace, request_id or self.request_id, self.route, dict(self.headers),
                       in_flight, self.client_ip(trusted) if per_ip else None, self.hops,
                       self.client_address(trusted) if key is None else None, self.purpose, timing)


class Passage:
    """A request let in: counted from ``with`` until it ends, however it ends; ``body``: what ``admit`` read."""

    __slots__ = ("gate", "runtime", "body", "member")

    def __init__(self, gate: "Gate", runtime: "Runtime", body: bytes, member: object | None) -> None:
        self.gate, self.runtime, self.body, self.member = gate, runtime, body, member

    def __enter__(self) -> "Passage":
        self.gate.active += 1
        if self.member is not None:
            self.runtime.calls.add(self.member)   # the drain waits for the session, then ends it
        return self

    def __exit__(self, *exc: object) -> None:
        if self.member is not None:
            self.runtime.calls.discard(self.member)
        self.gate.active -= 1


class Gate:
    """The App's gate: one per worker, shared by every door, holding the count of what is in."""

    def __init__(self, runtime: Callable[[], "Runtime | None"]) -> None:
        self._runtime = runtime
        self.failed_auth = FailedAuth()   # 401s past a few a minute from one address wait, one after another
        self.active = 0   # requests let in and not yet out, for server.max_concurrent_requests

    def up(self) -> "Runtime":
        """The running Runtime, or the 503 while the gateway starts or stops."""
        runtime = self._runtime()
        if runtime is None:
            raise Unavailable("The gateway is starting or stopping; retry shortly")
        return runtime

    async def identify(self, scope: "Scope", request_id: str, *, trace: "TraceContext | None" = None,
                       credentials: Headers | None = None) -> Identity:
        """Who asks: on the data plane the hop guard, then the key (from ``credentials``, by default the
        headers), judged by the current revision and bound as the ``key_id`` log field."""
        headers, path = scope["headers"], scope["path"]
        runtime = self._runtime()
        if runtime is None or not path.startswith(DATA_PLANE_PREFIXES):
            return Identity(request_id, path, headers, scope.get("client"), trace=trace)
        snapshot = runtime.snapshot
        hops = inbound_hops(headers, snapshot.server.max_hops)
        credentials = headers if credentials is None else credentials
        try:
            judged = judge(credentials, snapshot.api_keys, runtime.control)
            if judged.digest is not None:   # a database key: its lookup (if the view lacks it), its last use
                judged = await settled(judged, runtime.control)
        except AuthenticationError as err:
            if err.code != "missing_api_key":   # a key was presented and refused: a guess, maybe
                peer = scope.get("client")
                trusted = snapshot.server.trusted_proxies
                await self.failed_auth.failed(limits.client_ip(peer, headers, trusted) if peer else "")
            raise
        if judged.key is not None:
            log_fields.bind(key_id=judged.key.id)
        return Identity(request_id, path, headers, scope.get("client"), judged.key, snapshot, hops, trace,
                        credentials, runtime.control, judged.record)

    async def admit(self, *, read: Callable[["ServerConfig"], Awaitable[bytes]] | None = None,
                    member: object | None = None, elsewhere: str = CALL) -> Passage:
        """Let a request in, or raise its refusal: the runtime up, not draining, ``read`` (its body) done,
        still not draining, under the cap. Enter the Passage at once: its count is what the cap reads.
        ``member``: a session, for the drain to wait for and end; ``elsewhere``: what the drain's 503 says."""
        runtime = self.up()
        self._refuse_if_draining(runtime, elsewhere)
        body = b""
        if read is not None:
            body = await read(runtime.snapshot.server)
            runtime = self.up()
            self._refuse_if_draining(runtime, elsewhere)   # the drain may have begun while the body came
        cap = runtime.snapshot.server.max_concurrent_requests
        if cap and self.active >= cap:
            raise TooManyConcurrentRequests(f"The gateway is at its limit of {cap} concurrent requests; retry shortly")
        return Passage(self, runtime, body, member)

    @staticmethod
    def _refuse_if_draining(runtime: "Runtime", elsewhere: str) -> None:
        if runtime.draining:
            raise ShuttingDown(f"The server is shutting down; {elsewhere}")
