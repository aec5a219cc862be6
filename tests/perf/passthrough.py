"""Minimal ASGI pass-through proxy: the performance ceiling of our stack.

Switchyard runs on hypercorn's trio worker and talks to backends with httpx.
This file does the least possible work on that same stack -- read the body,
forward it verbatim to one upstream, relay status, content-type and raw bytes
-- so the benchmark can separate "cost of hypercorn + httpx + trio" from
"cost of Switchyard's own routing logic". No framework, no parsing, no
headers beyond content-type, one shared keep-alive connection pool.

`--client` picks the client stack under the same app: `httpx` (the default:
httpx's own transport and pool), `httpx2` (its API-compatible fork the openai
SDK uses), or `pool`: httpx with Switchyard's upstream pool,
protocol.transport.PooledTransport, sized and configured as Switchyard
configures it. With `pool` it also does no more than Switchyard does around a
call (requests go straight to the pool, an answer of known length goes out
as one message, the process's garbage collector is set up as a Switchyard
worker's), so it is the floor of our fixed stack's cost (the ceiling of its
performance): what any router on hypercorn + trio + httpx with that pool
could reach, with no routing at all.

    python tests/perf/passthrough.py --upstream http://127.0.0.1:8081 --bind 127.0.0.1:8082 [--client pool]

The upstream may also come from the PASSTHROUGH_UPSTREAM environment variable.
"""
import argparse
import gc
import importlib
import os
import sys
from functools import partial
from pathlib import Path

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

# The repo root, for protocol.transport (--client pool); imported only then, so the others load nothing of ours.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))


def make_app(upstream: str, pool_size: int = 256, client_lib: str = "httpx"):
    """Return an ASGI app forwarding every request to `upstream` + same path.

    `client_lib` is "httpx" or its API-compatible fork "httpx2" (what the openai
    SDK uses), so the benchmark can compare the two HTTP client stacks, or
    "pool": httpx on Switchyard's PooledTransport, with the limits Switchyard
    gives it (pool_size connections, as many kept alive, 30 s keep-alive).
    """
    httpx = importlib.import_module("httpx" if client_lib == "pool" else client_lib)
    state: dict = {}

    async def lifespan(receive, send):
        # The client lives for the whole server lifetime so connections are reused.
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if client_lib == "pool":
                    from switchyard.protocol.wires.transport import PooledTransport
                    transport = PooledTransport(httpx.Limits(max_connections=pool_size,
                                                             max_keepalive_connections=pool_size,
                                                             keepalive_expiry=30.0))
                    state["client"] = httpx.AsyncClient(base_url=upstream, transport=transport, timeout=60.0)
                    state["transport"] = transport
                else:
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
        transport = state.get("transport")
        if transport is not None:
            # The floor does the least Switchyard does: straight to the pool (no AsyncClient.send
            # machinery), and an answer of known length read whole and sent as one message.
            response = await transport.handle_async_request(request)
            try:
                content_type = response.headers.get("content-type")
                out_headers = [(b"content-type", content_type.encode("latin-1"))] if content_type else []
                if "content-length" in response.headers:
                    data = b"".join([chunk async for chunk in response.stream])
                    out_headers.append((b"content-length", str(len(data)).encode()))
                    await send({"type": "http.response.start", "status": response.status_code,
                                "headers": out_headers})
                    await send({"type": "http.response.body", "body": data, "more_body": False})
                    return
                await send({"type": "http.response.start", "status": response.status_code, "headers": out_headers})
                async for chunk in response.stream:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                await response.aclose()
            return
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
    parser.add_argument("--client", choices=["httpx", "httpx2", "pool"], default="httpx")
    args = parser.parse_args()
    if not args.upstream:
        parser.error("--upstream or PASSTHROUGH_UPSTREAM is required")
    config = Config()
    config.bind = [args.bind]
    config.backlog = 1024  # wrk opens all connections at once; the default 100 would drop SYNs
    config.accesslog = None
    if args.client == "pool":
        # The floor runs its process as a Switchyard worker does (protocol/serving/workers.py): the imported
        # code frozen out of the collector, the youngest generation collected as rarely.
        from switchyard.protocol.serving.workers import GC_YOUNG_THRESHOLD
        gc.collect()
        gc.freeze()
        gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)
        config.keep_alive_timeout = 75
    trio.run(partial(serve, make_app(args.upstream.rstrip("/"), args.pool_size, args.client), config, mode="asgi"))


if __name__ == "__main__":
    main()
