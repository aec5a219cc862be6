"""A small MCP server built on the ``mcp`` SDK's ``MCPServer``, for the gateway's tests.

``python -m tests.mcp.tool_server stdio`` serves it over stdin/stdout (the
gateway starts it); ``python -m tests.mcp.tool_server http`` serves it over
Streamable HTTP with hypercorn on a free port of 127.0.0.1, under Trio, and
prints its URL as the first line of stdout. Its tools: ``echo``, ``add``,
``sleep`` (a hang), ``big`` (a result of any size), ``crash`` (the process
exits at once), ``headers`` (the request headers it was sent), ``pid`` (the
process's id) and ``garble`` (a line that is not JSON-RPC on stdout, then a
hang).
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("switchyard-test-tools")


@server.tool()
def echo(text: str) -> str:
    """Say ``text`` back."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """The sum of two integers."""
    return a + b


@server.tool()
async def sleep(seconds: float) -> str:
    """Answer after ``seconds``."""
    import anyio
    await anyio.sleep(seconds)
    return "slept"


@server.tool()
def big(size: int) -> str:
    """A text of ``size`` characters."""
    return "x" * size


@server.tool()
def crash() -> str:
    """End the process at once, mid-call."""
    os._exit(3)


@server.tool()
def headers(ctx: Context) -> dict[str, str]:
    """The HTTP request headers this call came with (none over stdio)."""
    seen = ctx.headers or {}
    return {k.lower(): v for k, v in seen.items()}


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
async def garble() -> str:
    """Write a line that is not JSON-RPC where the answers go (stdio), then never answer."""
    import anyio
    from mcp.server import stdio

    # the SDK serves the wire from a private duplicate of fd 1 (fd 1 itself goes to stderr while it serves)
    claim = stdio._claims.get(1)
    os.write(claim.private_fd if claim is not None and claim.private_fd is not None else 1,
             b"this line is not JSON-RPC\n")
    await anyio.sleep_forever()
    return "never"


async def serve_http() -> None:
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    app = server.streamable_http_app()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None

    async def started(binds: list[str]) -> None:
        print(binds[0] + "/mcp", flush=True)

    async with trio.open_nursery() as nursery:
        binds = await nursery.start(lambda task_status: serve(app, config, task_status=task_status))
        await started(binds)


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        import trio
        trio.run(serve_http)
    else:
        import anyio
        anyio.run(server.run_stdio_async, backend="trio")
