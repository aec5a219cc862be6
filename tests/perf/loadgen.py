"""The load tests/perf/bench.py puts on each target: wrk, bursts of streams, 1,000 held streams, scrapes.

wrk drives the non-streaming phases (C, one thread: it leaves the second
core to the server). Streams are driven from this process with trio + httpx,
because wrk cannot time a first chunk; the `direct` target (nginx) shows
what this client costs by itself.
"""
from __future__ import annotations

import json
import math
import re
import resource
import ssl
import subprocess
import threading
import time
from pathlib import Path

import httpx
import trio
from targets import MESSAGES, STREAM_EVENTS, Server, memory_mb, proc_snapshot, tree_cpu_seconds, tree_pids

# One TLS context for every client: httpx builds one per client otherwise
# (~10 ms each), which for 1,000 clients is seconds of set-up. No TLS is used.
_SSL = ssl.create_default_context()
OPEN_BATCH = 100  # connections opened at once: stays under a listen backlog of 100


# --------------------------------------------------------------------------- wrk

def write_wrk_lua(path: Path, body: dict, headers: dict[str, str], distinct: bool = False) -> Path:
    """A wrk script POSTing the same JSON body with the target's headers on every connection.

    `distinct`: every request differs instead, its last message's text ending in a tag no other request
    of the run has (run_wrk's nonce, wrk's thread, a count), so a response cache finds none of them.
    """
    text = json.dumps(body, separators=(",", ":"))
    lines = ["-- POST the same small chat request on every connection.", 'wrk.method = "POST"',
             f"wrk.body = '{text}'", 'wrk.headers["Content-Type"] = "application/json"']
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    if distinct:
        content = body["messages"][-1]["content"]
        head, tail = text.rsplit(json.dumps(content), 1)
        assert '"' not in content and "'" not in head + tail, "the tag is spliced into a Lua string"
        lines[0] = "-- POST a small chat request whose text no other request of the run has."
        lines += ["local threads, tag, n = 0, \"\", 0",
                  "function setup(thread) threads = threads + 1; thread:set(\"id\", threads) end",
                  "function init(args) tag = (args[1] or \"\") .. \"-\" .. (id or 0) .. \"-\" end",
                  "function request()",
                  "  n = n + 1",
                  f"  return wrk.format(nil, nil, nil, '{head}\"{content} ' .. tag .. n .. '\"{tail}')",
                  "end"]
    path.write_text("\n".join(lines) + "\n")
    return path


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not m:
        raise ValueError(f"unparsable wrk time {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(out: str) -> dict:
    """Pull requests/s, total requests, latency percentiles and error counts out of `wrk --latency` output."""
    result: dict = {"errors": 0, "non2xx": 0}
    pct = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)\s*$", out, re.M))
    for p in ("50", "99"):
        result[f"p{p}_ms"] = _ms(pct[p]) if p in pct else math.nan
    m = re.search(r"^\s*(\d+) requests in ([\d.]+\w+)", out, re.M)
    result["requests"] = int(m.group(1)) if m else 0
    m = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
    result["rps"] = float(m.group(1)) if m else 0.0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        result["errors"] = sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        result["non2xx"] = int(m.group(1))
    return result


def run_wrk(url: str, lua: Path, connections: int, duration: float, threads: int) -> dict:
    """One wrk phase. Its script gets a nonce (the time in ns) as its argument: a `distinct` script
    (write_wrk_lua) tags its requests with it, so no two phases send the same request."""
    duration = max(1, round(duration))  # wrk takes whole seconds
    argv = ["wrk", f"-t{min(threads, connections)}", f"-c{connections}", f"-d{duration}s", "--timeout", "10s",
            "--latency", "-s", str(lua), url, str(time.time_ns())]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30, check=True).stdout
    result = parse_wrk(out)
    result["raw"] = out
    return result


# --------------------------------------------------------------------------- streams

def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no data."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _clients(n: int) -> list[httpx.AsyncClient]:
    """One single-connection client per concurrent stream.

    A single client with an n-connection pool spends most of its time in
    httpcore's per-request pool scan (a poll() per idle connection), which
    would make the client, not the server, the thing being measured.
    """
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    return [httpx.AsyncClient(limits=limits, timeout=120.0, verify=_SSL) for _ in range(n)]


async def _open_connections(clients: list[httpx.AsyncClient], server: Server) -> None:
    """A cheap GET on every client, OPEN_BATCH at a time, so the burst does not pay for connecting."""
    async def get(client: httpx.AsyncClient) -> None:
        try:
            await client.get(server.base + server.warm_path, headers=server.headers)
        except httpx.HTTPError:
            pass  # the burst will count it

    for i in range(0, len(clients), OPEN_BATCH):
        async with trio.open_nursery() as nursery:
            for client in clients[i:i + OPEN_BATCH]:
                nursery.start_soon(get, client)


async def _stream(client: httpx.AsyncClient, server: Server, body: bytes, on_first=None) -> tuple:
    """One streaming request: (ok, seconds to first chunk, seconds to end)."""
    headers = {**server.headers, "content-type": "application/json"}
    t0 = time.perf_counter()
    first = None
    data = bytearray()
    try:
        async with client.stream("POST", server.base + server.stream_path, content=body, headers=headers) as r:
            async for chunk in r.aiter_raw():
                if first is None and chunk:
                    first = time.perf_counter()
                    if on_first:
                        on_first()
                data += chunk
            ok = r.status_code == 200 and data.rstrip().endswith(b"data: [DONE]") \
                and data.count(b"data:") == STREAM_EVENTS + 1
    except httpx.HTTPError:
        ok = False
    end = time.perf_counter()
    return ok, (first - t0 if first else math.nan), end - t0


def stream_bodies(server: Server, n: int) -> list[bytes]:
    """The bodies of `n` simultaneous streams: one, or with `server.distinct` each its own (its last
    message's text tagged with the time in ns and its index), so a response cache finds none of them."""
    if not server.distinct:
        return [json.dumps({"model": server.stream_model, "messages": MESSAGES, "stream": True}).encode()] * n
    tag = time.time_ns()
    return [json.dumps({"model": server.stream_model, "stream": True,
                        "messages": [*MESSAGES[:-1], {**MESSAGES[-1], "content": f"{MESSAGES[-1]['content']} "
                                                                                 f"{tag}-{i}"}]}).encode()
            for i in range(n)]


async def _stream_phase(server: Server, streams: int, bursts: int) -> dict:
    ttfc: list[float] = []
    total: list[float] = []
    failures = 0
    wall = server_cpu = client_cpu = 0.0
    clients = _clients(streams)
    try:
        with trio.fail_after(60 + 60 * bursts):  # bounds a hung target
            await _open_connections(clients, server)
            for _ in range(bursts):
                results = []
                go = trio.Event()

                async def one(client: httpx.AsyncClient, body: bytes, go: trio.Event = go,
                              results: list = results) -> None:
                    await go.wait()
                    results.append(await _stream(client, server, body))

                bodies = stream_bodies(server, len(clients))
                cpu0, pcpu0 = tree_cpu_seconds(server.proc.pid), time.process_time()
                async with trio.open_nursery() as nursery:
                    for client, body in zip(clients, bodies, strict=True):
                        nursery.start_soon(one, client, body)
                    await trio.sleep(0.05)  # let every task reach go.wait()
                    t0 = time.perf_counter()
                    go.set()
                wall += time.perf_counter() - t0
                client_cpu += time.process_time() - pcpu0
                server_cpu += tree_cpu_seconds(server.proc.pid) - cpu0
                for ok, first, end in results:
                    if ok:
                        ttfc.append(first * 1e3)
                        total.append(end * 1e3)
                    else:
                        failures += 1
    finally:
        for client in clients:
            await client.aclose()
    n = streams * bursts
    return {"ttfc_p50_ms": percentile(ttfc, 50), "ttfc_p99_ms": percentile(ttfc, 99),
            "total_p50_ms": percentile(total, 50), "total_p99_ms": percentile(total, 99),
            "streams_per_s": len(ttfc) / wall if wall else math.nan,
            "cpu_ms_per_stream": server_cpu * 1e3 / n, "client_cpu_pct": 100 * client_cpu / wall if wall else math.nan,
            "streams_ok": len(ttfc), "failures": failures}


def measure_streams(server: Server, streams: int, bursts: int) -> dict:
    """`bursts` bursts of `streams` simultaneous streaming requests, on connections opened beforehand.

    Per burst, every stream is released at once; TTFC and total time are per
    stream, streams/s is completed streams over the bursts' wall time, and
    CPU per stream is the server tree's CPU over the bursts divided by the
    streams sent. client_cpu_pct is this process's CPU as a share of one
    core during the bursts: near 100 the client, not the server, is the
    limit.
    """
    return trio.run(_stream_phase, server, streams, bursts)


async def _hold(server: Server, streams: int, sample_every: float) -> dict:
    body = json.dumps({"model": server.stream_model, "messages": MESSAGES, "stream": True}).encode()
    pids = tree_pids(proc_snapshot(), server.proc.pid)
    clients = _clients(streams)
    state = {"open": 0, "max_open": 0}
    samples: list[tuple[int, float]] = []
    results = []

    def opened() -> None:
        state["open"] += 1
        state["max_open"] = max(state["max_open"], state["open"])

    async def one(client: httpx.AsyncClient) -> None:
        ok, first, end = await _stream(client, server, body, on_first=opened)
        if not math.isnan(first):
            state["open"] -= 1
        results.append((ok, first, end))

    async def sample(done: trio.Event) -> None:
        while not done.is_set():
            samples.append((state["open"], memory_mb(pids)))
            await trio.sleep(sample_every)

    try:
        with trio.fail_after(180):
            await _open_connections(clients, server)
            idle = memory_mb(pids)
            done = trio.Event()
            async with trio.open_nursery() as outer:
                outer.start_soon(sample, done)
                async with trio.open_nursery() as nursery:
                    for client in clients:
                        nursery.start_soon(one, client)
                done.set()
    finally:
        for client in clients:
            await client.aclose()
    at_full = [rss for n_open, rss in samples if n_open == streams]
    ok = [r for r in results if r[0]]
    return {"streams": streams, "ok": len(ok), "max_open": state["max_open"], "rss_idle_mb": idle,
            "rss_all_open_mb": max(at_full) if at_full else math.nan,
            "rss_peak_mb": max(rss for _, rss in samples) if samples else math.nan,
            "samples_all_open": len(at_full), "ttfc_p50_ms": percentile([r[1] * 1e3 for r in ok], 50),
            "total_p50_ms": percentile([r[2] * 1e3 for r in ok], 50)}


def hold_streams(server: Server, streams: int, sample_every: float = 0.2) -> dict:
    """Hold `streams` slow streams open at once and read the server's RSS while they are.

    The server's `stream_model` must be served by the paced upstream, whose
    streams last seconds. RSS (VmRSS of the server tree) is sampled every
    `sample_every` seconds; rss_all_open_mb is the largest sample taken
    while every stream had its first chunk and none had ended yet.
    """
    return trio.run(_hold, server, streams, sample_every)


# --------------------------------------------------------------------------- scraping

class Scraper:
    """GET /metrics every `interval` seconds in a thread, as a Prometheus server would (more often)."""

    def __init__(self, url: str, interval: float):
        self.url, self.interval = url, interval
        self.stop_event = threading.Event()
        self.scrapes = self.failures = 0
        self.thread = threading.Thread(target=self._run, name="metrics-scraper", daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=5.0) as client:
            while not self.stop_event.wait(self.interval):
                try:
                    ok = client.get(self.url).status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.scrapes += 1
                self.failures += not ok

    def __enter__(self) -> "Scraper":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join(10)


def raise_fd_limit(need: int) -> None:
    """Raise this process's open-file limit (children inherit it) so 1,000+ streams fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard) if hard != resource.RLIM_INFINITY else need,
                                                    hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < need:
        print(f"warning: open-file limit {resource.getrlimit(resource.RLIMIT_NOFILE)[0]} < {need}", flush=True)

