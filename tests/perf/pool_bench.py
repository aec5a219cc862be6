"""Micro-benchmark of the upstream connection pool alone: httpx's default transport vs Switchyard's.

Why: httpcore's pool costs more per request the more connections it holds
open; protocol/wires/transport.py should not. This measures one client process
(one shared ``httpx.AsyncClient``, as Switchyard uses it) POSTing a chat
request to nginx answering from memory (so the upstream costs next to
nothing) from ``concurrency`` tasks, after first
opening ``open`` connections so that many sit in the pool. It reports
requests/s and the client's CPU time per request (``time.process_time``;
nginx runs in its own process and is not counted), interleaving the two
transports per scenario and taking the median over rounds.

    /tmp/probe/bin/python tests/perf/pool_bench.py [--duration 5] [--rounds 3]

Needs nginx on PATH; it is started here (its own config, a temp prefix, a
free 127.0.0.1 port) and stopped in a finally block.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from switchyard.protocol.wires.transport import PooledTransport

SCENARIOS = ((32, 32), (32, 256), (256, 256))   # (concurrent requests, connections held open)
BODY = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "hi"}]}).encode()
ANSWER = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000, "model": "bench",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
                 "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18}}, separators=(",", ":"))
NGINX_CONF = """daemon off;
master_process on;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{ default_type application/json; return 200 '{body}'; }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_listening(port: int, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    with trio.fail_after(timeout):
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"nginx exited with {proc.returncode}")
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.1)
                continue
            await stream.aclose()
            return


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM nginx's process group, SIGKILL it if it is still there after 5 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
            proc.wait(5)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def make_transport(kind: str, size: int) -> httpx.AsyncBaseTransport:
    limits = httpx.Limits(max_connections=size, max_keepalive_connections=size, keepalive_expiry=30.0)
    if kind == "httpx":
        return httpx.AsyncHTTPTransport(limits=limits, retries=0)
    return PooledTransport(limits)


async def run_one(kind: str, url: str, concurrency: int, open_conns: int, duration: float) -> dict:
    """Open ``open_conns`` connections, then load with ``concurrency`` tasks for ``duration`` seconds."""
    transport = make_transport(kind, open_conns)
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(transport=transport, timeout=30.0) as client:
        async def post() -> None:
            response = await client.post(url, content=BODY, headers=headers)
            assert response.status_code == 200, response.status_code

        async with trio.open_nursery() as nursery:   # every connection opened at once, then left idle
            for _ in range(open_conns):
                nursery.start_soon(post)
        done = 0
        stop_at = trio.current_time() + duration

        async def worker() -> None:
            nonlocal done
            while trio.current_time() < stop_at:
                await post()
                done += 1

        cpu0, t0 = time.process_time(), time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(worker)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return {"rps": done / wall, "cpu_us_per_req": cpu * 1e6 / done, "requests": done}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    prefix = Path(tempfile.mkdtemp(prefix="switchyard-pool-bench-"))
    prefix.chmod(0o755)   # nginx workers may run as another user
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(NGINX_CONF.format(prefix=prefix, port=port, body=ANSWER))
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    results: dict[str, list[dict]] = {}
    with open(prefix / "nginx.out", "wb") as log:
        nginx = subprocess.Popen(["nginx", "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf)],
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
    try:
        trio.run(wait_listening, port, nginx)
        for rnd in range(args.rounds):
            for concurrency, open_conns in SCENARIOS:
                for kind in ("httpx", "switchyard"):
                    r = trio.run(run_one, kind, url, concurrency, open_conns, args.duration)
                    results.setdefault(f"{kind} c{concurrency} open{open_conns}", []).append(r)
                    print(f"round {rnd + 1} {kind:10s} concurrency {concurrency:3d} open {open_conns:3d}: "
                          f"{r['rps']:7.0f} req/s  {r['cpu_us_per_req']:6.0f} us CPU/req", flush=True)
    finally:
        stop(nginx)
    print("\n| transport | concurrent requests | open connections | req/s | client CPU us/req |")
    print("|---|---|---|---|---|")
    for name, rows in results.items():
        kind, c, o = name.split()
        print(f"| {kind} | {c[1:]} | {o[4:]} | {statistics.median(r['rps'] for r in rows):.0f} | "
              f"{statistics.median(r['cpu_us_per_req'] for r in rows):.0f} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
