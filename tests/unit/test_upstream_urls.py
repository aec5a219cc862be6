"""How a backend's url and a route are joined."""

import pytest

from switchyard.actors.addressing import join_url


@pytest.mark.parametrize("base, path, expected", [
    ("http://h:8000", "/v1/chat/completions", "http://h:8000/v1/chat/completions"),
    ("http://h:8000/v1", "/v1/chat/completions", "http://h:8000/v1/chat/completions"),
    ("http://h:8000/v1", "/health", "http://h:8000/health"),
    ("http://h:11434/v1", "/api/version", "http://h:11434/api/version"),
    ("http://h/stream", "/v1/models", "http://h/stream/v1/models"),
    ("http://h/stream", "/health", "http://h/stream/health"),
])
def test_base_ending_in_v1_names_the_api_root(base, path, expected):
    assert join_url(base, path) == expected


def test_chat_requests_carry_the_basic_credentials_of_a_userinfo_url():
    from switchyard.actors.addressing import api_url
    from switchyard.config.schema import Snapshot
    from switchyard.protocol.wires.upstream import Upstream

    upstream = Upstream(Snapshot())
    url = api_url("https://user:secret@vllm.internal:8000", "/v1/chat/completions")
    request = upstream.request("POST", url, [("content-type", "application/json"),
                                             ("authorization", "Bearer sk-x")], b"{}")
    assert request.headers.get_list("authorization") == ["Basic dXNlcjpzZWNyZXQ="]
    plain = upstream.request("POST", api_url("http://vllm.internal:8000", "/v1/chat/completions"),
                             [("authorization", "Bearer sk-x")], b"{}")
    assert plain.headers["authorization"] == "Bearer sk-x"


def test_chat_requests_carry_host_and_content_length_once_and_their_body():
    from switchyard.actors.addressing import api_url
    from switchyard.config.schema import Snapshot
    from switchyard.protocol.wires.upstream import Upstream

    upstream = Upstream(Snapshot())
    request = upstream.request("POST", api_url("http://user:pw@vllm.internal:8000/v1", "/v1/chat/completions"),
                               [("content-type", "application/json")], b'{"model":"m"}')
    names = [name.lower() for name, _ in request.headers.raw]
    assert names.count(b"host") == 1 and names.count(b"content-length") == 1
    assert request.headers["host"] == "vllm.internal:8000"   # never the userinfo
    assert request.headers["content-length"] == "13" and request.content == b'{"model":"m"}'
    assert str(request.url) == "http://user:pw@vllm.internal:8000/v1/chat/completions"
