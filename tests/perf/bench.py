"""Switchyard throughput/latency benchmark against a near-free upstream.

Why this exists: to know how much Switchyard costs on top of the stack it is
built on. One run starts these servers on free 127.0.0.1 ports --

  direct       nginx answering OpenAI routes from memory (tests/perf/nginx.conf.template)
  passthrough  tests/perf/passthrough.py: hypercorn(trio) + httpx doing nothing but
               forwarding -- the ceiling for anything built on that stack
               (opt-in: passthrough-httpx2, the same on the httpx2 fork)
  switchyard   `switchyard serve --workers 1` with backends pointing at the nginx

-- and measures them interleaved (round 1: direct, passthrough, switchyard;
round 2: the same; ...), so slow drift of the machine (thermal, noisy
neighbours) hits every target alike instead of biasing whichever ran last.

Per target and round:
  * wrk POST /v1/chat/completions at 32 and at 128 connections: requests/s,
    p50/p99 latency (wrk --latency), errors;
  * server CPU time per request: utime+stime of the server process and all its
    descendants from /proc, before and after the wrk phase, divided by the
    number of completed requests;
  * streaming: 100 concurrent `"stream": true` POSTs (trio + httpx client in
    this process, connections warmed by one discarded burst first), time to
    first body chunk and to end of stream, p50/p99;
  * "other CPU": CPU used by processes outside the benchmark during each wrk
    phase, so a phase disturbed by e.g. a test run next door is visible (and
    repeated once).

Then it prints medians over rounds, the Switchyard/pass-through ratios, and
writes a markdown summary (--out) and raw numbers (--json).

    /tmp/probe/bin/python tests/perf/bench.py --rounds 3 --duration 10 --out /tmp/bench.md
    ... --targets direct,passthrough          # without Switchyard
    ... --profile                             # plus one py-spy profiled load phase

Needs: nginx (Debian nginx-light) and wrk on PATH; trio, httpx, hypercorn in
the running interpreter; py-spy for --profile. Everything started here is
stopped in `finally` blocks and the whole run is bounded by a watchdog alarm.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import trio

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
# Interleaving order. passthrough-httpx2 (same proxy on the httpx2 fork) is opt-in via --targets.
ALL_TARGETS = ("direct", "passthrough", "passthrough-httpx2", "switchyard")
DEFAULT_TARGETS = "direct,passthrough,switchyard"
CONNECTION_LEVELS = (32, 128)
MESSAGES = [{"role": "user", "content": "hi"}]
CHAT_REQUEST = {"model": "bench", "messages": MESSAGES}
STREAM_EVENTS = 20


# --------------------------------------------------------------------------- upstream bodies

def chat_completion_body() -> str:
    """A realistic, fixed OpenAI chat.completion response."""
    return json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000, "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18},
    }, separators=(",", ":"))


def sse_body() -> str:
    """20 chat.completion.chunk events (role, 18 content tokens, finish) then [DONE]."""
    events = []
    for i in range(STREAM_EVENTS):
        if i == 0:
            delta, finish = {"role": "assistant", "content": ""}, None
        elif i == STREAM_EVENTS - 1:
            delta, finish = {}, "stop"
        else:
            delta, finish = {"content": f"tok{i} "}, None
        chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000,
                 "model": "bench-stream", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        events.append("data: " + json.dumps(chunk, separators=(",", ":")) + "\n\n")
    events.append("data: [DONE]\n\n")
    return "".join(events)


def models_body(model: str) -> str:
    return json.dumps({"object": "list", "data": [{"id": model, "object": "model", "created": 1700000000,
                                                    "owned_by": "bench"}]}, separators=(",", ":"))


def nginx_quote(text: str) -> str:
    """Escape text for a single-quoted nginx string (nginx turns \\n back into a newline)."""
    assert "$" not in text, "nginx would expand $ as a variable"
    return text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")


def write_nginx_conf(prefix: Path, port: int) -> Path:
    text = (HERE / "nginx.conf.template").read_text()
    for key, value in {"PREFIX": str(prefix), "PORT": str(port),
                       "CHAT_BODY": nginx_quote(chat_completion_body()),
                       "SSE_BODY": nginx_quote(sse_body()),
                       "MODELS_BODY": nginx_quote(models_body("bench")),
                       "STREAM_MODELS_BODY": nginx_quote(models_body("bench-stream"))}.items():
        text = text.replace(f"@@{key}@@", value)
    assert not re.search(r"@@[A-Z_]+@@", text), "unfilled placeholder in nginx.conf.template"
    path = prefix / "nginx.conf"
    path.write_text(text)
    return path


def write_switchyard_config(path: Path, port: int, nginx_port: int) -> Path:
    path.write_text(f"""\
server:
  bind_address: "127.0.0.1:{port}"
  connection_pool_size: 256
selection_strategy: RoundRobin
health_checks:
  path: /health
backends:
  - name: fast
    type: generic
    url: http://127.0.0.1:{nginx_port}
    models: [bench]
    discovery: false
  - name: fast-stream
    type: generic
    url: http://127.0.0.1:{nginx_port}/stream
    models: [bench-stream]
    discovery: false
""")
    return path


# --------------------------------------------------------------------------- processes

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server subprocess in its own process group, logging to a file in the work dir."""

    def __init__(self, name: str, argv: list[str], port: int, workdir: Path, *,
                 chat_path: str, stream_path: str, stream_model: str, ready_paths: tuple[str, ...]):
        self.name, self.argv, self.port, self.workdir = name, argv, port, workdir
        self.base = f"http://127.0.0.1:{port}"
        self.chat_path, self.stream_path, self.stream_model = chat_path, stream_path, stream_model
        self.ready_paths = ready_paths
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=REPO, start_new_session=True)
        log.close()

    def stop(self) -> None:
        """SIGTERM our process group, SIGKILL it if it is still there after 5 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def wait_ready(self, timeout: float) -> None:
        """Poll the readiness paths until one answers 200 (404 moves on to the next path)."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
                for path in self.ready_paths:
                    try:
                        r = client.get(self.base + path)
                        last = f"GET {path} -> {r.status_code}"
                        if r.status_code == 200:
                            return
                        if r.status_code != 404:
                            break
                    except httpx.HTTPError as exc:
                        last = f"GET {path} -> {type(exc).__name__}"
                        break
                time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready after {timeout:.0f}s ({last}):\n{self.log_tail()}")

    def check(self) -> None:
        """One real chat and one real stream request, so we never benchmark 404s."""
        with httpx.Client(timeout=10.0) as client:
            r = client.post(self.base + self.chat_path, json=CHAT_REQUEST)
            if r.status_code != 200 or "choices" not in r.json():
                raise RuntimeError(f"{self.name}: chat check got {r.status_code}: {r.text[:300]}")
            r = client.post(self.base + self.stream_path,
                            json={"model": self.stream_model, "messages": MESSAGES, "stream": True})
            events = [line for line in r.text.splitlines() if line.startswith("data:")]
            if r.status_code != 200 or len(events) != STREAM_EVENTS + 1 or events[-1].strip() != "data: [DONE]":
                raise RuntimeError(f"{self.name}: stream check got {r.status_code}, {len(events)} events: {r.text[:300]}")


def proc_snapshot() -> tuple[dict[int, list[int]], dict[int, float]]:
    """(children by parent pid, CPU seconds by pid) for every process, from /proc/<pid>/stat.

    CPU is utime+stime plus cutime+cstime, so work of children that already
    exited and were reaped stays counted in their parent.
    """
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # fields[0] is the state (stat field 3)
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        cpu[pid] = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return children, cpu


def tree_pids(snapshot, root: int) -> set[int]:
    children, _ = snapshot
    pids, todo = set(), [root]
    while todo:
        pid = todo.pop()
        pids.add(pid)
        todo.extend(children.get(pid, []))
    return pids


def tree_cpu_seconds(root: int, snapshot=None) -> float:
    """CPU seconds of `root` and all its live descendants."""
    snapshot = snapshot or proc_snapshot()
    return sum(snapshot[1].get(pid, 0.0) for pid in tree_pids(snapshot, root))


def other_cpu_seconds(before, after) -> float:
    """CPU used between two snapshots by processes outside this benchmark's tree and outside kernel threads.

    That is the disturbance: a test suite or build running next to us. A
    process that exited in between had its whole CPU time added to its
    parent's cutime/cstime, so what it had already used before is taken off
    again to count only the interval.
    """
    ours = tree_pids(after, os.getpid()) | tree_pids(before, os.getpid()) | tree_pids(after, 2) | tree_pids(before, 2)
    grown = sum(cpu - before[1].get(pid, 0.0) for pid, cpu in after[1].items() if pid not in ours)
    exited = sum(cpu for pid, cpu in before[1].items() if pid not in ours and pid not in after[1])
    return grown - exited


# --------------------------------------------------------------------------- wrk

WRK_LUA = """-- POST the same small chat request on every connection.
wrk.method = "POST"
wrk.body = '%s'
wrk.headers["Content-Type"] = "application/json"
"""

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
    argv = ["wrk", f"-t{min(threads, connections)}", f"-c{connections}", f"-d{duration:g}s", "--timeout", "10s",
            "--latency", "-s", str(lua), url]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30, check=True).stdout
    result = parse_wrk(out)
    result["raw"] = out
    return result


# --------------------------------------------------------------------------- streaming client

def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no data."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def _stream_bursts(url: str, model: str, streams: int, bursts: int) -> tuple[list, list, int]:
    """Run bursts of `streams` simultaneous streaming requests; return TTFC and total times (ms), failures.

    Each concurrent slot gets its own one-connection httpx client: a single
    client with a 100-connection pool spends most of its time in httpcore's
    per-request pool scan (a poll() per idle connection), which would make
    the client, not the server, the thing being measured.
    """
    body = json.dumps({"model": model, "messages": MESSAGES, "stream": True}).encode()
    headers = {"content-type": "application/json"}
    ttfc: list[float] = []
    total: list[float] = []
    failures = 0

    async def one(client: httpx.AsyncClient, go: trio.Event, record: bool) -> None:
        nonlocal failures
        await go.wait()
        t0 = time.perf_counter()
        first = None
        data = bytearray()
        try:
            async with client.stream("POST", url, content=body, headers=headers) as r:
                async for chunk in r.aiter_raw():
                    if first is None and chunk:
                        first = time.perf_counter()
                    data += chunk
                ok = r.status_code == 200 and data.rstrip().endswith(b"data: [DONE]") \
                    and data.count(b"data:") == STREAM_EVENTS + 1
        except httpx.HTTPError:
            ok = False
        end = time.perf_counter()
        if record:
            if ok:
                ttfc.append((first - t0) * 1e3)
                total.append((end - t0) * 1e3)
            else:
                failures += 1

    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [httpx.AsyncClient(limits=limits, timeout=30.0) for _ in range(streams)]
    try:
        # Burst 0 opens the connections and is not recorded. fail_after bounds a hung target.
        with trio.fail_after(30 * (bursts + 1)):
            for burst in range(bursts + 1):
                go = trio.Event()
                async with trio.open_nursery() as nursery:
                    for client in clients:
                        nursery.start_soon(one, client, go, burst > 0)
                    await trio.sleep(0.05)  # let every task reach go.wait()
                    go.set()
    finally:
        for client in clients:
            await client.aclose()
    return ttfc, total, failures


def measure_streams(server: Server, streams: int, bursts: int) -> dict:
    ttfc, total, failures = trio.run(_stream_bursts, server.base + server.stream_path, server.stream_model,
                                     streams, bursts)
    return {"ttfc_p50_ms": percentile(ttfc, 50), "ttfc_p99_ms": percentile(ttfc, 99),
            "total_p50_ms": percentile(total, 50), "total_p99_ms": percentile(total, 99),
            "streams_ok": len(ttfc), "stream_failures": failures}


# --------------------------------------------------------------------------- profiling

def profile_phase(server: Server, lua: Path, connections: int, duration: float, threads: int,
                  out_prefix: str) -> tuple[Path, Path]:
    """One wrk phase with py-spy attached to the server tree; writes collapsed stacks and a top-functions report."""
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(pyspy).exists() and not shutil.which(pyspy):
        raise RuntimeError("py-spy not found: /tmp/probe/bin/pip install py-spy")
    collapsed = Path(out_prefix + ".collapsed.txt")
    argv = [pyspy, "record", "--pid", str(server.proc.pid), "--subprocesses", "--format", "raw",
            "--rate", "200", "--duration", str(int(duration) + 2), "--output", str(collapsed)]
    spy = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        time.sleep(1.0)  # let py-spy attach before load starts
        load = run_wrk(server.base + server.chat_path, lua, connections, duration, threads)
        out, _ = spy.communicate(timeout=duration + 30)
        if spy.returncode != 0 or not collapsed.exists():
            raise RuntimeError(f"py-spy failed ({spy.returncode}): {out.decode(errors='replace')[-500:]}")
    finally:
        if spy.poll() is None:
            os.killpg(spy.pid, signal.SIGKILL)
            spy.wait()
    report = Path(out_prefix + ".top.txt")
    report.write_text(top_functions(collapsed.read_text(), f"{server.name}, wrk {connections} connections, "
                                    f"{duration:g}s, {load['rps']:.0f} req/s under profiling"))
    return report, collapsed


def top_functions(collapsed: str, title: str, n: int = 40) -> str:
    """Self and inclusive sample share per function from py-spy's collapsed ('raw') stacks.

    A frame looks like `func (path/to/file.py:123)`; lines are dropped so one
    function is one row. Process/thread pseudo-frames are skipped.
    """
    self_c: Counter = Counter()
    incl_c: Counter = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")
                  if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        k = int(count)
        total += k
        self_c[frames[-1]] += k
        for f in set(frames):
            incl_c[f] += k
    if not total:
        return f"# {title}\nno samples (process idle or py-spy could not read it)\n"
    lines = [f"# {title}", f"# {total} samples (idle frames excluded)", "", "## self time (leaf function)"]
    lines += [f"{100 * c / total:6.2f}%  {f}" for f, c in self_c.most_common(n)]
    lines += ["", "## inclusive time (function on the stack)"]
    lines += [f"{100 * c / total:6.2f}%  {f}" for f, c in incl_c.most_common(n)]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- reporting

ROWS = [  # (key, label, format)
    ("c32_rps", "req/s @32 conns", "{:.0f}"),
    ("c32_p50_ms", "p50 ms @32", "{:.2f}"),
    ("c32_p99_ms", "p99 ms @32", "{:.2f}"),
    ("c32_cpu_ms_per_req", "server CPU ms/req @32", "{:.3f}"),
    ("c128_rps", "req/s @128 conns", "{:.0f}"),
    ("c128_p50_ms", "p50 ms @128", "{:.2f}"),
    ("c128_p99_ms", "p99 ms @128", "{:.2f}"),
    ("c128_cpu_ms_per_req", "server CPU ms/req @128", "{:.3f}"),
    ("ttfc_p50_ms", "stream TTFC p50 ms (100 conc.)", "{:.1f}"),
    ("ttfc_p99_ms", "stream TTFC p99 ms (100 conc.)", "{:.1f}"),
    ("total_p50_ms", "stream total p50 ms", "{:.1f}"),
    ("total_p99_ms", "stream total p99 ms", "{:.1f}"),
    ("errors", "errors (socket+non-2xx+stream), all rounds", "{:.0f}"),
]


def median_of(rounds: list[dict], key: str) -> float:
    values = [r[key] for r in rounds if key in r and not math.isnan(r[key])]
    if key == "errors":
        return float(sum(values))
    return statistics.median(values) if values else math.nan


def fmt(value: float, spec: str) -> str:
    return "n/a" if value is None or math.isnan(value) else spec.format(value)


def machine_info() -> dict:
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass

    def version(argv: list[str]) -> str:
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (r.stdout + r.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unknown"

    return {"cores": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
            "python": platform.python_version(), "nginx": version(["nginx", "-v"]),
            "wrk": version(["wrk", "-v"]), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def render_markdown(results: dict[str, list[dict]], args, info: dict, command: str,
                    profile_note: str | None, failed: dict[str, str]) -> str:
    targets = list(results)
    ratio = "switchyard" in targets and "passthrough" in targets
    out = [f"## Benchmark run {info['date']}", "",
           f"Machine: {info['cores']} cores, {info['cpu']}, Linux {info['kernel']}, Python {info['python']}, "
           f"{info['nginx']}, {info['wrk']}.", "",
           f"Command: `{command}`", "",
           f"{args.rounds} interleaved rounds x {args.duration:g}s per wrk phase, wrk -t{args.wrk_threads}; "
           f"streaming: {args.streams} concurrent streams x {args.stream_bursts} bursts per round. "
           "Values are medians over rounds.", ""]
    head = "| metric | " + " | ".join(targets) + (" | switchyard / passthrough |" if ratio else " |")
    out += [head, "|" + "---|" * (len(targets) + 1 + ratio)]
    for key, label, spec in ROWS:
        vals = [median_of(results[t], key) for t in targets]
        row = f"| {label} | " + " | ".join(fmt(v, spec) for v in vals) + " |"
        if ratio:
            s, p = median_of(results["switchyard"], key), median_of(results["passthrough"], key)
            row += f" {fmt(s / p, '{:.2f}x') if p and key != 'errors' else ''} |"
        out.append(row)
    if ratio:
        out += ["", "Switchyard / pass-through (medians): " + ", ".join(
            f"{label} {fmt(median_of(results['switchyard'], k) / median_of(results['passthrough'], k), '{:.2f}x')}"
            for k, label in (("c32_rps", "req/s@32"), ("c32_p99_ms", "p99@32"),
                             ("c128_rps", "req/s@128"), ("c128_p99_ms", "p99@128")))]
    out += ["", "Per round (other CPU = share of the machine's CPU used by processes outside the benchmark "
            "during the 32/128 phase; more than a few % means that phase was disturbed):", "",
            "| target | round | req/s@32 | p99@32 ms | req/s@128 | p99@128 ms | "
            "CPU ms/req@128 | TTFC p50 ms | TTFC p99 ms | errors | other CPU % 32/128 |", "|" + "---|" * 11]
    for i in range(args.rounds):
        for t in targets:
            if i < len(results[t]):
                r = results[t][i]
                out.append(f"| {t} | {i + 1} | {fmt(r['c32_rps'], '{:.0f}')} | {fmt(r['c32_p99_ms'], '{:.2f}')} | "
                           f"{fmt(r['c128_rps'], '{:.0f}')} | {fmt(r['c128_p99_ms'], '{:.2f}')} | "
                           f"{fmt(r['c128_cpu_ms_per_req'], '{:.3f}')} | {fmt(r['ttfc_p50_ms'], '{:.1f}')} | "
                           f"{fmt(r['ttfc_p99_ms'], '{:.1f}')} | {r['errors']} | "
                           f"{fmt(r['c32_other_cpu_pct'], '{:.0f}')}/{fmt(r['c128_other_cpu_pct'], '{:.0f}')} |")
    repeated = sum(r.get("repeated_phases", 0) for rows in results.values() for r in rows)
    if repeated:
        out += ["", f"{repeated} wrk phase(s) were repeated because more than {args.disturbed_pct:g}% of the "
                "machine's CPU went to outside processes; the table shows the last attempt."]
    if profile_note:
        out += ["", profile_note]
    for name, reason in failed.items():
        out += ["", f"**{name} {reason.splitlines()[0]}** (see its log in the work dir)"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- main

def switchyard_argv(args, config: Path, port: int) -> list[str]:
    if args.switchyard_cmd:
        base = shlex.split(args.switchyard_cmd)
    else:
        script = Path(sys.executable).parent / "switchyard"
        base = [str(script)] if script.exists() else [sys.executable, "-m", "protocol.cli"]
    return base + ["serve", "--config", str(config), "--bind", f"127.0.0.1:{port}", "--workers", "1"]


def measure(server: Server, lua: Path, args) -> dict:
    """One round for one target: wrk at each connection level (with CPU accounting), then streams.

    Besides the server's own CPU, it records how much of the machine went to
    processes outside this benchmark ("other CPU %"): on a shared
    2-core box a test suite running next door shows up there, and a phase
    with a high value is not comparable to the others.
    """
    row: dict = {"errors": 0, "repeated_phases": 0}
    for conns in CONNECTION_LEVELS:
        for attempt in range(args.retry_disturbed + 1):
            snap0, t0 = proc_snapshot(), time.monotonic()
            w = run_wrk(server.base + server.chat_path, lua, conns, args.duration, args.wrk_threads)
            snap1, t1 = proc_snapshot(), time.monotonic()
            other_pct = 100 * other_cpu_seconds(snap0, snap1) / ((t1 - t0) * (os.cpu_count() or 1))
            if other_pct <= args.disturbed_pct or attempt == args.retry_disturbed:
                break
            print(f"   {server.name} @{conns}: {other_pct:.0f}% CPU used outside the benchmark, repeating",
                  flush=True)
            row["repeated_phases"] += 1
        cpu0, cpu1 = tree_cpu_seconds(server.proc.pid, snap0), tree_cpu_seconds(server.proc.pid, snap1)
        row[f"c{conns}_other_cpu_pct"] = other_pct
        row[f"c{conns}_rps"] = w["rps"]
        row[f"c{conns}_p50_ms"] = w["p50_ms"]
        row[f"c{conns}_p99_ms"] = w["p99_ms"]
        row[f"c{conns}_requests"] = w["requests"]
        row[f"c{conns}_cpu_ms_per_req"] = (cpu1 - cpu0) * 1e3 / w["requests"] if w["requests"] else math.nan
        row["errors"] += w["errors"] + w["non2xx"]
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} died during load:\n{server.log_tail()}")
    s = measure_streams(server, args.streams, args.stream_bursts)
    row.update(s)
    row["errors"] += s["stream_failures"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk phase")
    parser.add_argument("--targets", default=DEFAULT_TARGETS, help="comma list of " + ",".join(ALL_TARGETS))
    parser.add_argument("--out", type=Path, help="write the markdown summary here")
    parser.add_argument("--json", type=Path, help="write raw per-round numbers here")
    parser.add_argument("--wrk-threads", type=int, default=1,
                        help="wrk threads; 1 leaves the second core to the server on a 2-core box")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of wrk per target before round 1")
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--stream-bursts", type=int, default=3)
    parser.add_argument("--switchyard-cmd", help="command before 'serve ...' (default: switchyard console "
                        "script next to this python, else python -m protocol.cli)")
    parser.add_argument("--profile", action="store_true", help="after the rounds, one py-spy profiled wrk phase")
    parser.add_argument("--profile-target", default="switchyard")
    parser.add_argument("--ready-timeout", type=float, default=30.0)
    parser.add_argument("--disturbed-pct", type=float, default=10.0,
                        help="a wrk phase during which processes outside the benchmark used more than this %% "
                        "of the machine's CPU counts as disturbed ...")
    parser.add_argument("--retry-disturbed", type=int, default=1, help="... and is repeated up to this many times")
    args = parser.parse_args()

    targets = [t for t in ALL_TARGETS if t in args.targets.split(",")]
    unknown = set(args.targets.split(",")) - set(ALL_TARGETS)
    if unknown or not targets:
        parser.error(f"unknown targets {sorted(unknown)}")
    for tool in ("nginx", "wrk"):
        if not shutil.which(tool):
            parser.error(f"{tool} not on PATH: apt-get install -y nginx-light wrk")
    if args.profile and args.profile_target not in targets:
        parser.error("--profile-target must be one of --targets")

    # Watchdog: whatever hangs, the run ends and the finally blocks stop every child.
    phase = 2 * (args.duration + 1) * (1 + args.retry_disturbed) + 5 + args.stream_bursts * 3
    budget = int(len(targets) * (args.rounds * phase + args.warmup + args.ready_timeout) + 120
                 + (args.duration + 40 if args.profile else 0))

    def on_alarm(signum, frame):
        raise TimeoutError(f"benchmark exceeded its {budget}s budget")

    def on_term(signum, frame):
        raise SystemExit(143)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(budget)

    workdir = Path(tempfile.mkdtemp(prefix="switchyard-bench-"))
    os.chmod(workdir, 0o755)  # nginx workers may run as another user
    print(f"work dir (logs, configs): {workdir}", flush=True)
    lua = workdir / "post.lua"
    lua.write_text(WRK_LUA % json.dumps(CHAT_REQUEST, separators=(",", ":")))

    nginx_port = free_port()
    nginx_prefix = workdir / "nginx"
    nginx_prefix.mkdir(mode=0o755)
    conf = write_nginx_conf(nginx_prefix, nginx_port)
    servers: dict[str, Server] = {
        "direct": Server("direct", ["nginx", "-p", str(nginx_prefix), "-e", str(nginx_prefix / "error.log"),
                                    "-c", str(conf)], nginx_port, workdir,
                         chat_path="/v1/chat/completions", stream_path="/stream/v1/chat/completions",
                         stream_model="bench-stream", ready_paths=("/health",)),
    }
    for name, lib in (("passthrough", "httpx"), ("passthrough-httpx2", "httpx2")):
        if name in targets:
            port = free_port()
            servers[name] = Server(
                name, [sys.executable, str(HERE / "passthrough.py"), "--upstream", f"http://127.0.0.1:{nginx_port}",
                       "--bind", f"127.0.0.1:{port}", "--client", lib], port, workdir,
                chat_path="/v1/chat/completions", stream_path="/stream/v1/chat/completions",
                stream_model="bench-stream", ready_paths=("/health",))
    if "switchyard" in targets:
        port = free_port()
        config = write_switchyard_config(workdir / "switchyard.yaml", port, nginx_port)
        servers["switchyard"] = Server(
            "switchyard", switchyard_argv(args, config, port), port, workdir,
            chat_path="/v1/chat/completions", stream_path="/v1/chat/completions",
            stream_model="bench-stream", ready_paths=("/ready", "/health"))

    results: dict[str, list[dict]] = {t: [] for t in targets}
    failed: dict[str, str] = {}

    def drop(name: str, reason: str) -> None:
        """A broken target (say, Switchyard mid-development) is reported and left out; the rest still run."""
        print(f"!! {name} {reason}", flush=True)
        failed[name] = reason
        if name in targets:
            targets.remove(name)
        servers[name].stop()

    profile_note = None
    command = " ".join(shlex.quote(a) for a in ["python", "tests/perf/bench.py", *sys.argv[1:]])
    try:
        for server in servers.values():  # nginx first: the others need it
            print(f"starting {server.name}: {' '.join(server.argv)}", flush=True)
            try:
                server.start()
                server.wait_ready(args.ready_timeout)
                server.check()
            except (RuntimeError, httpx.HTTPError, ValueError) as exc:
                if server.name == "direct":
                    raise
                drop(server.name, f"failed to start: {exc}")
        for t in list(targets):
            if args.warmup > 0:
                try:
                    run_wrk(servers[t].base + servers[t].chat_path, lua, 32, args.warmup, args.wrk_threads)
                except subprocess.SubprocessError as exc:
                    drop(t, f"failed in warm-up: {exc}")
        for rnd in range(1, args.rounds + 1):
            for t in list(targets):
                try:
                    row = measure(servers[t], lua, args)
                except (RuntimeError, subprocess.SubprocessError, trio.TooSlowError) as exc:
                    drop(t, f"failed in round {rnd}: {exc}")
                    continue
                results[t].append(row)
                print(f"round {rnd} {t:18s} req/s@32 {row['c32_rps']:8.0f} p99 {row['c32_p99_ms']:7.2f}ms | "
                      f"req/s@128 {row['c128_rps']:8.0f} p99 {row['c128_p99_ms']:7.2f}ms | "
                      f"cpu/req {row['c128_cpu_ms_per_req']:.3f}ms | ttfc p50 {row['ttfc_p50_ms']:.1f} "
                      f"p99 {row['ttfc_p99_ms']:.1f}ms | errors {row['errors']} | other cpu "
                      f"{row['c32_other_cpu_pct']:.0f}%/{row['c128_other_cpu_pct']:.0f}%", flush=True)
        if args.profile and args.profile_target in targets:
            prefix = str((args.out.parent / args.out.stem) if args.out else workdir / "bench")
            prefix += f"-profile-{args.profile_target}"
            try:
                report, collapsed = profile_phase(servers[args.profile_target], lua, 128, args.duration,
                                                  args.wrk_threads, prefix)
            except (RuntimeError, subprocess.SubprocessError) as exc:
                print(f"!! profile failed: {exc}", flush=True)
                profile_note = f"Profile failed: {exc}"
            else:
                print(f"profile: {report} (collapsed stacks: {collapsed})", flush=True)
                top = report.read_text().split("## inclusive")[0].strip().splitlines()
                profile_note = (f"Profile (py-spy; {report.name}), self time, top 15:\n\n```\n"
                                + "\n".join(top[:19]) + "\n```")
    finally:
        signal.alarm(0)
        for server in reversed(list(servers.values())):
            server.stop()

    info = machine_info()
    results = {t: rows for t, rows in results.items() if rows}
    md = render_markdown(results, args, info, command, profile_note, failed)
    print()
    print(md)
    if args.out:
        args.out.write_text(md)
        print(f"wrote {args.out}")
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "command": command, "results": results,
                                         "failed": failed}, indent=1))
        print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
