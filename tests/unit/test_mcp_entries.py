"""The ``mcp`` entries of a chat or Responses body (``actors/mcp/entries.py``): what the gateway serves, and
the 400 naming the field of what it cannot."""

import pytest

from switchyard.actors.errors import GatewayError
from switchyard.actors.mcp.entries import McpUse, uses
from switchyard.config.mcp_servers import McpServer

SERVERS = (McpServer(name="github", url="https://mcp.example.com/mcp"),
           McpServer(name="files", command="/usr/bin/mcp-files"))


def body(*tools, **extra):
    return {"model": "m", "input": "hi", "tools": list(tools), **extra}


def test_entries_are_read_with_their_tool_filters():
    read = uses(body({"type": "function", "name": "f"},
                     {"type": "mcp", "server_label": "github", "allowed_tools": ["search"], "require_approval": "never",
                      "server_url": "https://mcp.example.com/mcp"},
                     {"type": "mcp", "server_label": "files", "allowed_tools": {"read_only": True}}), SERVERS, False)
    assert read == (McpUse("github", frozenset({"search"})), McpUse("files", None, True))
    assert read[1].admits({"name": "read", "annotations": {"readOnlyHint": True}})
    assert not read[1].admits({"name": "write"})
    assert not read[0].admits({"name": "push"})


@pytest.mark.parametrize(("entry", "extra", "param"), [
    ({"server_label": "nope"}, {}, "tools[0].server_label"),
    ({}, {}, "tools[0].server_label"),
    ({"server_label": "github", "server_url": "https://evil.example/mcp"}, {}, "tools[0].server_url"),
    ({"server_label": "files", "server_url": "http://127.0.0.1/mcp"}, {}, "tools[0].server_url"),
    ({"server_label": "github", "headers": {"authorization": "Bearer x"}}, {}, "tools[0].headers"),
    ({"server_label": "github", "connector_id": "connector_gmail"}, {}, "tools[0].connector_id"),
    ({"server_label": "github", "require_approval": "always"}, {}, "tools[0].require_approval"),
    ({"server_label": "github", "allowed_tools": "search"}, {}, "tools[0].allowed_tools"),
    ({"server_label": "github", "allowed_tools": {"tool_names": [3]}}, {}, "tools[0].allowed_tools.tool_names"),
    ({"server_label": "github", "allowed_tools": {"names": []}}, {}, "tools[0].allowed_tools.names"),
    ({"server_label": "github"}, {"stream": True}, "stream"),
    ({"server_label": "github"}, {"tool_choice": {"type": "mcp", "server_label": "github"}}, "tool_choice"),
])
def test_what_the_gateway_cannot_serve_is_a_400_naming_the_field(entry, extra, param):
    with pytest.raises(GatewayError) as refused:
        uses(body({"type": "mcp", **entry}, **{k: v for k, v in extra.items() if k != "stream"}), SERVERS,
             stream=extra.get("stream", False))
    assert (refused.value.status, refused.value.param) == (400, param)


def test_a_server_named_twice_is_refused():
    with pytest.raises(GatewayError) as refused:
        uses(body({"type": "mcp", "server_label": "github"}, {"type": "mcp", "server_label": "github"}), SERVERS, False)
    assert refused.value.param == "tools[1].server_label"
