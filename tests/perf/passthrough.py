"""Minimal ASGI pass-through proxy: the performance ceiling of our stack.

Switchyard runs on hypercorn's trio worker and talks to backends with httpx.
This file does the least possible work on that same stack -- read the body,
forward it verbatim to one upstream, relay status, content-type and raw bytes
-- so the benchmark can separate "cost of hypercorn + httpx + trio" from
"cost of Switchyard's own routing logic". No framework, no parsing, no
headers beyond content-type, one shared keep-alive connection pool.

    python tests/perf/passthrough.py --upstream http://127.0.0.1:8081 --bind 127.0.0.1:8082

The upstream may also come from the PASSTHROUGH_UPSTREAM environment variable.
"""
import argparse
import importlib
import os
from functools import partial

import trio
from hypercorn.config import Config
from hypercorn.trio import serve


def make_app(upstream: str, pool_size: int = 256, client_lib: str = "httpx"):
    """Return an ASGI app forwarding every request to `upstream` + same path.

    `client_lib` is "httpx" or its API-compatible fork "httpx2" (what the openai
    SDK uses), so the benchmark can compare the two HTTP client stacks.
    """
    httpx = importlib.import_module(client_lib)
    state: dict = {}

    async def lifespan(receive, send):
        # The client lives for the whole server lifetime so connections are reused.
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                limits = httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size)
                state["client"] = httpx.AsyncClient(base_url=upstream, limits=limits, timeout=60.0)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await state["client"].aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        body = bytearray()
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k == b"content-type"}
        target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        client = state["client"]
        request = client.build_request(scope["method"], target, content=bytes(body), headers=headers)
        response = await client.send(request, stream=True)
        try:
            content_type = response.headers.get("content-type")
            out_headers = [(b"content-type", content_type.encode("latin-1"))] if content_type else []
            await send({"type": "http.response.start", "status": response.status_code, "headers": out_headers})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", default=os.environ.get("PASSTHROUGH_UPSTREAM"), help="base URL, e.g. http://127.0.0.1:8081")
    parser.add_argument("--bind", default="127.0.0.1:8082")
    parser.add_argument("--pool-size", type=int, default=256)
    parser.add_argument("--client", choices=["httpx", "httpx2"], default="httpx")
    args = parser.parse_args()
    if not args.upstream:
        parser.error("--upstream or PASSTHROUGH_UPSTREAM is required")
    config = Config()
    config.bind = [args.bind]
    config.backlog = 1024  # wrk opens all connections at once; the default 100 would drop SYNs
    config.accesslog = None
    trio.run(partial(serve, make_app(args.upstream.rstrip("/"), args.pool_size, args.client), config, mode="asgi"))


if __name__ == "__main__":
    main()
