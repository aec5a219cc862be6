"""How a backend's url and a route are joined."""

import pytest

from protocol.upstream import join_url


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
