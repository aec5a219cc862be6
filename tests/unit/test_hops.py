"""The hop guard's rules (actors/hops.py), the self-addressed backend check (config/self_address.py) and
``server.max_hops``."""

import httpx
import pytest

from switchyard.actors.errors import InvalidRequest, LoopDetected
from switchyard.actors.hops import HEADER, inbound_hops, outbound
from switchyard.config.load import ConfigError, load_text
from switchyard.config.self_address import points_at
from switchyard.protocol.wires.upstream import Upstream

H = HEADER.encode()


def test_a_request_without_the_header_has_passed_no_gateway():
    assert inbound_hops([(b"content-type", b"application/json")], 3) == 0


def test_a_count_up_to_max_hops_is_let_through():
    assert inbound_hops([(H, b"0")], 3) == 0
    assert inbound_hops([(H, b"3")], 3) == 3


def test_a_count_past_max_hops_is_508_loop_detected():
    with pytest.raises(LoopDetected) as caught:
        inbound_hops([(H, b"4")], 3)
    err = caught.value
    assert (err.status, err.code, err.param) == (508, "loop_detected", HEADER)
    assert err.details == {"hops": 4, "max_hops": 3}
    assert "server.max_hops" in err.message


def test_max_hops_zero_refuses_any_request_from_another_gateway():
    assert inbound_hops([], 0) == 0
    with pytest.raises(LoopDetected):
        inbound_hops([(H, b"1")], 0)


@pytest.mark.parametrize("value", [b"", b"-1", b"+1", b"1.0", b"one", b"0x3", b"1000", b"1 2", "٣".encode()])
def test_a_value_that_is_not_a_decimal_count_is_400_naming_the_header(value):
    with pytest.raises(InvalidRequest) as caught:
        inbound_hops([(H, value)], 3)
    assert caught.value.status == 400 and caught.value.param == HEADER
    assert caught.value.code == "invalid_hop_count" and HEADER in caught.value.message


def test_the_header_sent_twice_is_400_naming_it():
    with pytest.raises(InvalidRequest) as caught:
        inbound_hops([(H, b"1"), (H, b"1")], 3)
    assert caught.value.param == HEADER and "more than once" in caught.value.message


def test_an_upstream_request_carries_one_more_than_the_call_arrived_with():
    assert outbound(0) == (HEADER, "1")
    assert outbound(2) == (HEADER, "3")


@pytest.mark.parametrize("url, bind", [
    ("http://127.0.0.1:8080/v1", "127.0.0.1:8080"),
    ("http://localhost:8080", "127.0.0.1:8080"),
    ("http://127.0.0.1:8080", "localhost:8080"),
    ("http://127.0.0.2:8080", "0.0.0.0:8080"),
    ("http://[::1]:8080", "[::]:8080"),
    ("http://0.0.0.0:8080", "127.0.0.1:8080"),
    ("http://gw.internal", "gw.internal:80"),
    ("https://GW.internal/v1", "gw.internal:443"),
])
def test_a_url_naming_the_listen_address_points_at_the_gateway(url, bind):
    assert points_at(url, bind)


@pytest.mark.parametrize("url, bind", [
    ("http://127.0.0.1:8081", "127.0.0.1:8080"),
    ("http://10.0.0.5:8080", "0.0.0.0:8080"),
    ("http://10.0.0.5:8080", "127.0.0.1:8080"),
    ("http://other.internal:8080", "gw.internal:8080"),
    ("https://127.0.0.1", "127.0.0.1:80"),
    ("http://b.simulated", "0.0.0.0:80"),
])
def test_a_url_elsewhere_does_not(url, bind):
    assert not points_at(url, bind)


SELF = """
server: {bind_address: "0.0.0.0:8080"}
backends:
  - {name: me, type: openai, url: "http://localhost:8080/v1", models: [demo]}
  - {name: other, type: openai, url: "http://10.0.0.5:8080/v1", models: [demo]}
"""


def test_a_backend_at_the_gateways_own_address_is_a_load_warning_naming_it():
    loaded = load_text(SELF)
    [warning] = [w for w in loaded.warnings if "listen address" in w]
    assert warning.startswith("backends[0].url: backend 'me' points at this gateway's own listen address")


def test_a_disabled_backend_at_the_gateways_own_address_is_not_warned_about():
    loaded = load_text(SELF.replace("models: [demo]}", "models: [demo], enabled: false}", 1))
    assert not [w for w in loaded.warnings if "listen address" in w]


def test_max_hops_defaults_small():
    assert load_text(SELF).snapshot.server.max_hops == 3


def test_max_hops_out_of_range_is_an_error_naming_its_path():
    with pytest.raises(ConfigError) as caught:
        load_text(SELF.replace("bind_address: \"0.0.0.0:8080\"", "bind_address: \"0.0.0.0:8080\", max_hops: -1"))
    assert any(e.startswith("server.max_hops:") for e in caught.value.errors)


def test_the_gateways_own_upstream_requests_count_one_hop():
    snapshot = load_text(SELF).snapshot
    upstream = Upstream(snapshot)
    assert upstream.client.headers[HEADER] == "1"   # health checks, discovery, engine stats
    url = httpx.URL("http://10.0.0.5:8080/v1/chat/completions")
    assert upstream.request("POST", url, [], b"{}").headers[HEADER] == "1"   # the classifier
    assert upstream.request("POST", url, [outbound(2)], b"{}").headers.get_list(HEADER) == ["3"]   # a call's
