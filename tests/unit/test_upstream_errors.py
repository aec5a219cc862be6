"""map_upstream_exceptions: httpx's failures become the gateway's taxonomy, naming the backend."""

from __future__ import annotations

import httpx
import pytest

from switchyard.actors.errors import UpstreamConnectError, UpstreamProtocolError, UpstreamTimeout
from switchyard.protocol.wires.upstream_errors import map_upstream_exceptions


@pytest.mark.parametrize(("raised", "expected", "text"), [
    (httpx.ConnectTimeout("slow"), UpstreamTimeout, "Backend 'b1' timed out (connect)"),
    (httpx.ReadTimeout("slow"), UpstreamTimeout, "Backend 'b1' timed out (read)"),
    (httpx.PoolTimeout("full"), UpstreamTimeout, "Backend 'b1' timed out (pool)"),
    (httpx.ConnectError("refused"), UpstreamConnectError, "Backend 'b1' connection failed: refused"),
    (httpx.ReadError("reset"), UpstreamConnectError, "Backend 'b1' connection failed: reset"),
    (httpx.RemoteProtocolError("garbage"), UpstreamProtocolError, "Backend 'b1' protocol error: garbage"),
    (httpx.DecodingError("bad gzip"), UpstreamProtocolError, "Backend 'b1' protocol error: bad gzip"),
    (httpx.UnsupportedProtocol("ftp"), UpstreamConnectError, "Backend 'b1' transport error: ftp"),
])
def test_httpx_failures_are_mapped_with_the_backend_and_their_cause(raised, expected, text):
    with pytest.raises(expected) as caught, map_upstream_exceptions("b1"):
        raise raised
    assert caught.value.message == text
    assert caught.value.backend == "b1"
    assert caught.value.__cause__ is raised


@pytest.mark.parametrize(("raised", "unreached"), [
    (httpx.ConnectError("refused"), True),          # refused, DNS: nothing was sent
    (httpx.ConnectTimeout("slow"), True),
    (httpx.ReadError("reset"), False),              # broke after the request went out
    (httpx.WriteError("broken pipe"), False),
    (httpx.ReadTimeout("slow"), False),
    (httpx.PoolTimeout("full"), False),
    (httpx.RemoteProtocolError("garbage"), False),
])
def test_a_connection_that_could_not_be_opened_is_marked_unreached(raised, unreached):
    with pytest.raises(Exception) as caught, map_upstream_exceptions("b1"):
        raise raised
    assert caught.value.unreached is unreached


def test_timeouts_say_which_limit():
    with pytest.raises(UpstreamTimeout) as caught, map_upstream_exceptions("b1"):
        raise httpx.WriteTimeout("slow")
    assert caught.value.details == {"timeout": "write"}


def test_other_exceptions_pass_through_untouched():
    error = ValueError("not ours to map")
    with pytest.raises(ValueError) as caught, map_upstream_exceptions("b1"):
        raise error
    assert caught.value is error


def test_nothing_raised_nothing_mapped():
    with map_upstream_exceptions("b1"):
        pass
