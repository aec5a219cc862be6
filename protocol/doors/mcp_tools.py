"""A chat or Responses body's ``mcp`` tools, checked at the door (``actors/mcp/entries.py``; docs/mcp.md).

The ``responses_tools`` policy says first whether ``type: "mcp"`` may be sent
at all (on ``/v1/responses`` its whole walk has already run; on chat
completions its type rule for ``mcp`` runs here); then each entry must name a
configured server and nothing the gateway cannot serve. The request headers
the named servers' ``forward_headers`` list ride on the Call to its tool calls.
"""

from __future__ import annotations

from typing import Mapping

import attrs

from switchyard.actors.mcp import entries
from switchyard.actors.messages import Call
from switchyard.protocol.doors.responses_tools import enforce_mcp


def checked(call: Call, headers: Mapping[bytes, bytes], chat: bool) -> Call:
    """``call``, with its tool headers when it names MCP servers; the 400 naming the field otherwise."""
    if not entries.named(call.payload):
        return call
    snapshot = call.snapshot
    if chat:
        enforce_mcp(call.payload, snapshot.responses_tools)
    used = {u.server for u in entries.uses(call.payload, snapshot.mcp_servers, call.stream)}
    wanted = {name for s in snapshot.mcp_servers if s.name in used for name in s.forward_headers}
    if not wanted:
        return call
    forwarded = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in headers.items()
                 if name.decode("latin-1").lower() in wanted}
    return attrs.evolve(call, tool_headers=forwarded)
