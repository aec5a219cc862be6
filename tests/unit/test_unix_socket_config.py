"""A backend on a Unix socket: one test per rule of its ``url`` and how its requests are addressed."""

import httpx
import pytest

from switchyard.actors.addressing import api_url, join_url
from switchyard.actors.routing.dial_permits import permit_spans_answer
from switchyard.actors.routing.resume import takes_resume
from switchyard.config import unix_socket
from switchyard.config.load import ConfigError, load_text


def backend(url: str, btype: str = "vllm") -> str:
    return f"backends:\n  - {{name: a, type: {btype}, url: '{url}', models: [m]}}\n"


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(text, env={})
    return info.value.errors


@pytest.mark.parametrize("btype", ["openai", "vllm", "sglang", "ollama", "generic"])
def test_every_openai_compatible_type_takes_a_unix_socket_url(btype):
    snap = load_text(backend("unix:///run/engine.sock", btype), env={}).snapshot
    assert snap.backends[0].url == "unix:///run/engine.sock"


@pytest.mark.parametrize("btype", ["anthropic", "azure", "simulated"])
def test_a_unix_socket_url_on_another_type_is_refused_naming_the_field(btype):
    assert errors_of(backend("unix:///run/engine.sock", btype)) == [
        f"backends[0].url: is a unix:// socket, which only the OpenAI-compatible types take "
        f"(openai, vllm, sglang, ollama, generic), not {btype}"]


def test_the_socket_path_must_be_absolute():
    assert errors_of(backend("unix://run/engine.sock")) == [
        "backends[0].url: must name an absolute socket path, as in unix:///run/engine.sock (three slashes), "
        "got 'unix://run/engine.sock'"]


def test_the_socket_path_fits_a_unix_socket_address():
    path = "/" + "s" * 107
    assert errors_of(backend("unix://" + path)) == [
        "backends[0].url: names a socket path of 108 bytes; a Unix socket path holds at most 107"]


@pytest.mark.parametrize("url", ["unix:///run/engine.sock?x=1", "unix:///run/engine.sock#f",
                                 "unix:///run/my engine.sock", "unix:///run/"])
def test_the_socket_path_names_a_socket_file(url):
    [error] = errors_of(backend(url))
    assert error.startswith("backends[0].url: must name a socket file")


@pytest.mark.parametrize("url", ["unix:///run/engine.sock:api", "unix:///run/engine.sock:"])
def test_what_follows_the_colon_is_an_http_path_prefix(url):
    [error] = errors_of(backend(url))
    assert error.startswith("backends[0].url: must follow the socket path with ':' and an HTTP path prefix")


@pytest.mark.parametrize("url, path, prefix", [
    ("unix:///run/engine.sock", "/run/engine.sock", ""),
    ("unix:///run/engine.sock:/v1/", "/run/engine.sock", "/v1"),
    ("unix:///run/Engine.sock:/api/openai", "/run/Engine.sock", "/api/openai"),
])
def test_a_unix_url_splits_into_the_socket_path_and_the_http_prefix(url, path, prefix):
    url = load_text(backend(url), env={}).snapshot.backends[0].url
    assert unix_socket.split(url) == (path, prefix)


@pytest.mark.parametrize("base, route, path", [
    ("unix:///run/Engine.sock", "/v1/models", "/v1/models"),
    ("unix:///run/Engine.sock:/v1", "/v1/chat/completions", "/v1/chat/completions"),
    ("unix:///run/Engine.sock:/v1", "/health", "/health"),
    ("unix:///run/Engine.sock:/api", "/v1/models", "/api/v1/models"),
])
def test_a_unix_socket_backends_routes_go_to_its_socket_by_the_tcp_rules(base, route, path):
    url = httpx.URL(join_url(base, route))   # as httpx parses it: the host lower-cased
    assert (url.scheme, url.raw_path.decode()) == ("http+unix", path)
    assert unix_socket.socket_path(url.raw_host) == "/run/Engine.sock"   # case survives
    assert api_url(base, route) == url


def test_a_unix_socket_backend_is_never_a_mid_stream_recovery_target():
    snap = load_text(backend("unix:///run/engine.sock") + "  - {name: b, type: vllm, url: 'http://h', models: [m]}\n",
                     env={}).snapshot
    assert [takes_resume(b) for b in snap.backends] == [False, True]


def test_only_a_non_streaming_dial_to_a_unix_socket_keeps_its_permit_to_the_end_of_the_answer():
    snap = load_text(backend("unix:///run/engine.sock") + "  - {name: b, type: vllm, url: 'http://h', models: [m]}\n",
                     env={}).snapshot
    sock, tcp = snap.backends
    assert [permit_spans_answer(sock, False), permit_spans_answer(sock, True), permit_spans_answer(tcp, False)] \
        == [True, False, False]
