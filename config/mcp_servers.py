"""MCP servers behind the gateway (``mcp_servers``): the tool servers ``/mcp`` aggregates.

Each server is reached over Streamable HTTP (``url``) or started by the
gateway as a stdio subprocess (``command``, ``args``, ``env``), never both.
Credentials come from the environment (``headers: {authorization: "Bearer
${TOOLS_TOKEN}"}``) or, per call, from the client's own request headers the
operator names in ``forward_headers``; the client's Switchyard key is never
among them, so ``authorization`` and ``x-api-key`` are refused there. A
tool's public name is ``<server>__<tool>`` (docs/mcp.md), so a server's name
is kept to letters, digits, ``_`` and ``-`` and never holds ``__`` itself.
"""

from __future__ import annotations

from typing import Any, Mapping

from attrs import frozen

from switchyard.config import rules, values
from switchyard.config.fields import field, load_section
from switchyard.config.rules import Invalid, Reader, child
from switchyard.config.telemetry import otlp_headers

SEPARATOR = "__"   # between a server's name and its tool's in the public name
# The client's own credentials for the gateway: never forwarded to a tool server.
NEVER_FORWARDED = ("authorization", "x-api-key", "cookie", "proxy-authorization")
MAX_NAME = 64


def _name(value: Any) -> str:
    text = rules.string(r"[A-Za-z0-9_-]{1,64}", "1-64 letters, digits, '_' or '-'")(value)
    if SEPARATOR in text or text.startswith("_") or text.endswith("_"):
        raise Invalid(f"must not hold '{SEPARATOR}' nor start or end with '_' (it is the tool names' "
                      f"separator: <server>{SEPARATOR}<tool>), got {text!r}")
    return text


def _command(value: Any) -> str:
    text = rules.string()(value)
    if not text.strip() or "\x00" in text:
        raise Invalid("must name an executable")
    return text


def _args(value: Any) -> tuple[str, ...]:
    out = rules.list_of(rules.any_string, "strings")(value)
    if any("\x00" in a for a in out):
        raise Invalid("must not contain NUL characters")
    return out


def _env(value: Any) -> tuple[tuple[str, str], ...]:
    """Variable name -> string value, for the subprocess (merged over a few of the gateway's own)."""
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping of variable names to strings, got {rules.type_name(value)}")
    out = []
    for name, text in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\x00" in name:
            raise Invalid(f"key {name!r}: must be an environment variable name")
        if not isinstance(text, str) or "\x00" in text:
            raise Invalid(f"{name}: must be a string (the value is not shown)")
        out.append((name, text))
    return tuple(out)


def _forwarded(value: Any) -> tuple[str, ...]:
    names = rules.list_of(values.header_name, "header names")(value)
    for name in names:
        if name in NEVER_FORWARDED:
            raise Invalid(f"must not name {name!r}: the client's credentials for the gateway are never "
                          f"forwarded (set the server's own credential in headers, from the environment)")
    return tuple(dict.fromkeys(names))


@frozen
class McpServer:
    """One tool server; exactly one of ``url`` and ``command``."""

    name: str = field("", _name)
    url: str | None = field(None, values.http_url)          # Streamable HTTP endpoint
    command: str | None = field(None, _command)             # stdio: the executable the gateway starts
    args: tuple[str, ...] = field((), _args)
    env: tuple[tuple[str, str], ...] = field((), _env, secret=True)
    headers: tuple[tuple[str, str], ...] = field((), otlp_headers, secret=True)   # sent on every request
    forward_headers: tuple[str, ...] = field((), _forwarded)   # the client's headers passed on, per call
    timeout: float = field(30.0, rules.duration(minimum=0.001, maximum=3600))   # one tool call, end to end
    max_result_bytes: int = field(1024 * 1024, rules.size(minimum=1, maximum=256 * 1024 * 1024))

    @property
    def stdio(self) -> bool:
        return self.command is not None


def _one_transport(server: McpServer, r: Reader) -> None:
    if not r.has("name"):
        r.problems.error(child(r.path, "name"), "is required")
    by_url, by_command = r.has("url"), r.has("command")
    if not by_url and not by_command:
        r.problems.error(r.path, "needs url (Streamable HTTP) or command (a stdio subprocess)")
    elif by_url and by_command:
        r.problems.error(child(r.path, "command"), "and url are exclusive: a server is reached one way")
    elif by_url:
        for key in ("args", "env"):
            if r.has(key):
                r.problems.error(child(r.path, key), "only applies to a stdio server (command)")
    else:
        for key in ("headers", "forward_headers"):
            if r.has(key):
                r.problems.error(child(r.path, key), "only applies to a Streamable HTTP server (url): "
                                                     "a stdio server has no request headers")


def mcp_servers(top: Reader) -> tuple[McpServer, ...]:
    """``mcp_servers``: each read by the declared walk; names unique."""
    out: list[McpServer] = []
    seen: dict[str, str] = {}
    for r in top.items("mcp_servers"):
        server = load_section(McpServer, r, _one_transport)
        if server.name in seen:
            r.problems.error(child(r.path, "name"), f"duplicate server name {server.name!r} "
                                                    f"(also {seen[server.name]})")
            continue
        if server.name:
            seen[server.name] = r.path
            out.append(server)
    return tuple(out)


def _globs(value: Any) -> tuple[str, ...]:
    out = rules.list_of(rules.string(r"[A-Za-z0-9_*?\[\]!-]{1,200}", "a name or glob of letters, digits, "
                                                                      "'_', '-' and *?[]"),
                        "names or globs")(value)
    if not out:
        raise Invalid("must not be empty; leave the key out to allow every one")
    return tuple(dict.fromkeys(out))


def allowlist() -> Any:
    """An ``allowed_mcp_servers`` / ``allowed_mcp_tools`` field of a key or an organization: globs (fnmatch,
    case-sensitive) on server names, or on public tool names (``<server>__<tool>``); None: every one."""
    return field(None, _globs)


@frozen
class McpTools:
    """``mcp_tools``: the tool loop of a chat or Responses call whose ``tools`` name MCP servers."""

    max_rounds: int = field(4, rules.integer(2, 20))            # model rounds of a call; the last is offered no tool
    max_calls_per_round: int = field(8, rules.integer(1, 64))   # tool calls run in a round; more answered "not run"
