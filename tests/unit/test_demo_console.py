"""When ``serve`` makes an admin token of one run and prints the console's link (protocol/serving/demo_console.py):
the embedded demo, on a loopback address, with no token of its own; never otherwise."""

from __future__ import annotations

import pytest

from switchyard.config.load import load_demo
from switchyard.protocol.serving.demo_console import console_link, console_url, wanted, with_admin_token

DEMO = None   # no --config: the embedded demo


@pytest.mark.parametrize("bind", ["127.0.0.1:8080", "127.1.2.3:9000", "[::1]:8080", "localhost:8080",
                                  "LOCALHOST:8080"])
def test_the_demo_on_a_loopback_address_makes_its_token(bind):
    assert wanted(DEMO, bind, None)


@pytest.mark.parametrize("bind", ["0.0.0.0:8080", "[::]:8080", "192.168.1.5:8080", "10.0.0.1:8080",
                                  "[2001:db8::1]:8080", "gateway.internal:8080", "localhost.example.com:8080"])
def test_the_demo_on_any_other_address_makes_none(bind):
    assert not wanted(DEMO, bind, None)
    assert console_link(DEMO, bind, None) is None


def test_a_config_file_never_gets_a_token_even_on_loopback():
    assert not wanted("switchyard.yaml", "127.0.0.1:8080", None)
    assert console_link("switchyard.yaml", "127.0.0.1:8080", None) is None


def test_a_token_given_by_the_config_is_kept():
    assert not wanted(DEMO, "127.0.0.1:8080", "operator-token-0123456789")


def test_each_run_makes_a_new_random_token_and_a_link_that_carries_it():
    first, second = console_link(DEMO, "127.0.0.1:8080", None), console_link(DEMO, "127.0.0.1:8080", None)
    assert first is not None and second is not None
    assert first.token != second.token
    assert len(first.token) == 43   # secrets.token_urlsafe(32)
    assert first.url == f"http://127.0.0.1:8080/admin/ui/?token={first.token}"
    assert first.token not in repr(first)


def test_the_link_names_the_address_as_bound():
    assert console_url("[::1]:8080", "t") == "http://[::1]:8080/admin/ui/?token=t"
    assert console_url("localhost:9000", "t") == "http://localhost:9000/admin/ui/?token=t"


def test_the_token_becomes_the_demo_snapshots_admin_token():
    demo = load_demo().snapshot
    assert demo.admin.token is None
    assert with_admin_token(demo, "run-token-0123456789").admin.token == "run-token-0123456789"
