"""Which MCP tools a caller may see and call at ``/mcp``, and the names they are known by there.

A tool is published as ``<server>__<tool>``: a server's name never holds
``__`` (``config/mcp_servers.py``), so the first ``__`` splits a public name
back into its server and the tool's name on that server, and two servers'
tools cannot collide. A key's and its organization's ``allowed_mcp_servers``
(globs on the server's name) and ``allowed_mcp_tools`` (globs on the public
name) all have to allow a tool; a list left out allows every one. Pure.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Collection

from switchyard.config.access import ApiKey
from switchyard.config.limits import Organization
from switchyard.config.mcp_servers import SEPARATOR


def public_name(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


def split_name(name: str, servers: Collection[str]) -> tuple[str, str] | None:
    """(server, tool) of a public name whose server is one of ``servers``; None otherwise."""
    server, sep, tool = name.partition(SEPARATOR)
    if not sep or not tool or server not in servers:
        return None
    return server, tool


def _matches(globs: tuple[str, ...] | None, name: str) -> bool:
    return globs is None or any(fnmatchcase(name, glob) for glob in globs)


def allows(key: ApiKey | None, organization: Organization | None, server: str, tool: str) -> bool:
    """Whether the caller may list and call ``tool`` of ``server`` (the tool's name on its server).
    ``key`` None: the data plane is open (no keys configured), and every tool is reachable."""
    name = public_name(server, tool)
    for owner in (key, organization):
        if owner is None:
            continue
        if not _matches(owner.allowed_mcp_servers, server) or not _matches(owner.allowed_mcp_tools, name):
            return False
    return True


def reaches_server(key: ApiKey | None, organization: Organization | None, server: str) -> bool:
    """Whether any tool of ``server`` could be allowed (its tools need not be asked for otherwise)."""
    return all(owner is None or _matches(owner.allowed_mcp_servers, server) for owner in (key, organization))
