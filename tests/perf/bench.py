"""Switchyard side by side with LiteLLM's proxy and a bare pass-through, over a near-free upstream.

Why this exists: a router's cost is paid on every request, so we measure
what Switchyard adds on top of the stack it is built on, and how it compares
with the proxy most Python users run. One run starts, on free 127.0.0.1
ports (targets.py builds them):

  direct              nginx answering OpenAI routes from memory: the upstream of every
                      target below, and the floor of the load generators
  passthrough         tests/perf/passthrough.py: hypercorn(trio) + httpx forwarding only,
                      on httpx's own pool (opt-in: passthrough-httpx2, on the httpx2 fork)
  passthrough-pool    the same pass-through on Switchyard's upstream pool (--client pool):
                      the floor of our fixed stack, what any router on it could reach
  litellm             LiteLLM's proxy, installed once into its own venv from
                      litellm.requirements.txt, config litellm_config.yaml (master key sent)
  switchyard          `switchyard serve --workers 1`, tracing off, no keys or policies; its usage
                      ledger is the default users get (SQLite, <data_dir>/usage.db)
  switchyard-features the same build with API keys (key sent), a request_params policy,
                      fallback chains, tracing (trace headers sent) and /metrics scraped 1/s
  switchyard-2w       (opt-in) `switchyard` with `--workers 2`, to see how it scales
  switchyard-base     (opt-in) `switchyard`'s config served by another build (--base-cmd),
                      so two builds are compared in one interleaved run
  switchyard-memledger (opt-in) `switchyard` with `usage: {ledger: memory}`: records kept in
                      the worker's memory, no disk; "ledger off", the closest there is to
                      the gateway before the ledger, to price the SQLite ledger
  switchyard-keyed    (opt-in) `switchyard` with the bench API key (sent) and priced models:
                      "no limits", the pair of switchyard-limits
  switchyard-dbkey    (opt-in) switchyard-keyed with no api_keys: the bench key is a database
                      key, made in its data dir with `switchyard keys create` (the target's
                      build) before it starts, its secret sent: database key vs config key
  switchyard-limits   (opt-in) switchyard-keyed whose key has a rate limit (requests and tokens
                      per minute) and a monthly USD budget, far above what the run uses, counted
                      in a redis-server the benchmark starts (state.redis_url): every call is
                      admitted by one Redis script and settled by another, none is refused
  switchyard-guardrails (opt-in) `switchyard` with one guardrail running every built-in detector
                      in enforce mode on both stages for its models (nothing in the bench's
                      prompt or answer matches): the cost of reading every call, vs `switchyard`
  switchyard-cache    (opt-in) `switchyard` with response_cache on (memory): the load repeats
                      one request, so almost every call is a hit answered from the cache;
                      the hit path vs `switchyard`'s backend call
  switchyard-all      (opt-in) everything on: switchyard-features (request_params, tracing, /metrics
                      scraped 1/s) whose key is a database key (made as switchyard-dbkey's) with
                      switchyard-limits' limits and budget in the run's redis-server, the SQLite
                      ledger, the guardrail of switchyard-guardrails, the response cache with its
                      semantic lookup (embeddings from nginx's /embed, a new random vector every
                      call) and OpenTelemetry spans exported at 10% sampling to a collector (nginx,
                      which drops them). Every request it is sent differs, so both lookups miss;
                      no fallback chains (a model with one bypasses the cache); vs `switchyard`
  switchyard-all-base (opt-in) switchyard-all's config served by another build (--base-cmd):
                      everything on, two builds in one interleaved run (that build needs database
                      keys with limits from `keys create` and the semantic cache)
  switchyard-limits-2w (opt-in) switchyard-limits with `--workers 2`, both workers deciding in the
                      run's Redis: CPU per request against one worker's

Every Switchyard process gets XDG_DATA_HOME=<work dir>/<target>-data, so its
ledger (server.data_dir's default) lives in the work dir, never in the
user's home; after the run the rows each SQLite ledger holds are counted.

and measures them interleaved (round 1: every target in turn; round 2: ...),
so slow drift of the machine hits every target alike. Per target and round:

  * wrk POST /v1/chat/completions at 32 and 128 connections: requests/s,
    p50/p99, errors; server CPU per request (utime+stime of the server's
    process tree from /proc, over the phase, per completed request);
  * streams: bursts of 100 and of 500 simultaneous `"stream": true` requests
    (20 chunks + [DONE]) on connections opened beforehand: time to first
    chunk and to the end, p50/p99; streams/s; server CPU per stream;
  * peak RSS: VmHWM of the server's process tree;
  * "other CPU": CPU of processes outside the benchmark during each phase;
    a wrk phase above --disturbed-pct is repeated once.

After the rounds, a fresh Switchyard and a fresh pooled pass-through (if
those targets ran) each hold 1,000 streams open at once against
paced_upstream.py (20 chunks over ~10 s) and their RSS is read meanwhile:
Switchyard's figure next to the floor of the stack it is built on.

With switchyard-limits, /metrics' rate_limit_admission_seconds is read
before round 1 and after the last, so its admission time (p50/p99,
bounded by the histogram's buckets) covers the measured rounds only; then
one 1-connection wrk phase on switchyard-keyed and switchyard-limits each
gives the latency the limits add with nothing queued, and the answer's
x-ratelimit-* headers, the Redis keys and script calls, the refusals and
the limiter's warnings show whether the limiter really ran.

It prints one table of medians over rounds with the ratios
Switchyard/LiteLLM, Switchyard/pass-through (both pools) and
features-on/features-off, the performance targets met or missed (report.py's
targets(); a ratio within 3 % of its threshold is flagged to be taken over 5
rounds), and per-round figures; --out writes it as markdown, --json the raw numbers.
Every target of report.py in one run (about 10-12 min on 2 cores):

    python tests/perf/bench.py --targets direct,passthrough-pool,litellm,switchyard,switchyard-all,\
switchyard-limits,switchyard-limits-2w --rounds 3 --out /tmp/bench.md --json /tmp/bench.json

    /tmp/probe/bin/python tests/perf/bench.py --out /tmp/bench.md --json /tmp/bench.json
    ... --targets direct,passthrough,switchyard   # without LiteLLM (no install)
    ... --profile                                 # plus py-spy profiled wrk and stream phases

Needs nginx and wrk on PATH; trio, httpx, hypercorn in this interpreter;
PyPI access on the first run (LiteLLM's venv, cached under --cache-dir);
py-spy for --profile; /usr/bin/redis-server and redis-cli (Debian's
redis-server) for switchyard-limits. Everything started here is stopped in `finally`
blocks and the whole run is bounded by a watchdog alarm.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import trio
from loadgen import Scraper, hold_streams, measure_streams, raise_fd_limit, run_wrk, write_wrk_lua
from report import CONNECTION_LEVELS, bucket_quantile, machine_info, render_markdown
from targets import (
    CHAT_REQUEST,
    EXPORT_HEADERS,
    FEATURES_HEADERS,
    HERE,
    KEY_HEADERS,
    Redis,
    Server,
    ensure_litellm,
    free_port,
    ledger_rows,
    litellm_env,
    litellm_master_key,
    litellm_pin,
    make_db_key,
    memory_mb,
    other_cpu_seconds,
    proc_snapshot,
    switchyard_env,
    tree_cpu_seconds,
    tree_pids,
    write_litellm_config,
    write_nginx_conf,
    write_switchyard_config,
)

ALL_TARGETS = ("direct", "passthrough", "passthrough-pool", "passthrough-httpx2", "litellm", "switchyard",
               "switchyard-features", "switchyard-2w", "switchyard-base", "switchyard-memledger",
               "switchyard-keyed", "switchyard-dbkey", "switchyard-limits", "switchyard-guardrails", "switchyard-cache",
               "switchyard-all", "switchyard-all-base", "switchyard-limits-2w")
DEFAULT_TARGETS = "direct,passthrough,passthrough-pool,litellm,switchyard,switchyard-features"
HOLD_TARGETS = ("passthrough-pool", "switchyard")  # the targets that hold --hold streams, in this order
PASSTHROUGH_CLIENTS = {"passthrough": "httpx", "passthrough-pool": "pool", "passthrough-httpx2": "httpx2"}
LIMITS_TARGET = "switchyard-limits"   # the one target whose limits live in the run's redis-server
GUARDRAILS_TARGET = "switchyard-guardrails"   # `switchyard` with every built-in detector on its models
CACHE_TARGET = "switchyard-cache"   # `switchyard` with response_cache on: the load's one request is a hit
ALL_ON_TARGET = "switchyard-all"   # everything on: database key, limits in Redis, ledger, guardrails, caches, OTLP
ALL_ON_TARGETS = (ALL_ON_TARGET, "switchyard-all-base")   # ... and the same config on the --base-cmd build
LIMITS_2W_TARGET = "switchyard-limits-2w"   # switchyard-limits on two workers sharing the run's Redis
DB_KEY_TARGET = "switchyard-dbkey"   # switchyard-keyed with its key in the database instead of api_keys
DB_KEY_TARGETS = (DB_KEY_TARGET, *ALL_ON_TARGETS)   # their key is made in the database before they start
REDIS_TARGETS = (LIMITS_TARGET, LIMITS_2W_TARGET, *ALL_ON_TARGETS)   # their limits live in the run's redis-server
SCRAPED_TARGETS = ("switchyard-features", *ALL_ON_TARGETS)   # /metrics scraped while they are measured
ADMISSION = "rate_limit_admission_seconds"
REFUSALS = "rate_limit_refusals_total"


# --------------------------------------------------------------------------- servers

def switchyard_base(args, cmd: str | None = None) -> list[str]:
    """The command before `serve ...` (or `keys ...`): `cmd`, --switchyard-cmd, or this interpreter's."""
    cmd = cmd or args.switchyard_cmd
    if cmd:
        return shlex.split(cmd)
    script = Path(sys.executable).parent / "switchyard"
    return [str(script)] if script.exists() else [sys.executable, "-m", "switchyard.protocol.serving.cli"]


def switchyard_argv(args, config: Path, port: int, workers: int = 1, cmd: str | None = None) -> list[str]:
    return switchyard_base(args, cmd) + ["serve", "--config", str(config), "--bind", f"127.0.0.1:{port}",
                                         "--workers", str(workers)]


def passthrough_argv(target: str, upstream: str, port: int) -> list[str]:
    return [sys.executable, str(HERE / "passthrough.py"), "--upstream", upstream, "--bind", f"127.0.0.1:{port}",
            "--client", PASSTHROUGH_CLIENTS[target], "--pool-size", "1100"]


def holds(args, targets: list[str]) -> list[str]:
    """The targets that will hold --hold streams open after the rounds."""
    return [t for t in HOLD_TARGETS if t in targets] if args.hold > 0 else []


def build_servers(args, targets: list[str], workdir: Path, redis_url: str | None = None) -> dict[str, Server]:
    """Every server of the run, in start order: the upstreams first, since the proxies check them.

    The paced upstream runs when a Switchyard target does (its configs have a
    backend on it) or when a target will hold streams (they come from it).
    """
    nginx_port, paced_port = free_port(), free_port()
    prefix = workdir / "nginx"
    prefix.mkdir(mode=0o755)
    conf = write_nginx_conf(prefix, nginx_port)
    common = dict(chat_path="/v1/chat/completions", stream_path="/v1/chat/completions", stream_model="bench-stream")
    on_nginx = {**common, "stream_path": "/stream/v1/chat/completions"}  # nginx serves streams under /stream
    nginx = ["nginx", "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf)]
    servers = {"direct": Server("direct", nginx, nginx_port, workdir, **on_nginx, ready_paths=("/health",))}
    if any(t.startswith("switchyard") for t in targets) or holds(args, targets):
        servers["paced"] = Server("paced", [sys.executable, str(HERE / "paced_upstream.py"), "--bind",
                                            f"127.0.0.1:{paced_port}", "--interval", str(args.hold_seconds / 20)],
                                  paced_port, workdir, **common, ready_paths=("/health",))
    for name in PASSTHROUGH_CLIENTS:
        if name in targets:
            port = free_port()
            servers[name] = Server(name, passthrough_argv(name, f"http://127.0.0.1:{nginx_port}", port), port,
                                   workdir, **on_nginx, ready_paths=("/health",))
    if "litellm" in targets:
        exe, seconds = ensure_litellm(args.cache_dir, args.litellm_python, timeout=900)
        print(f"LiteLLM: {litellm_pin()} at {exe}" + (f" (installed in {seconds:.0f}s)" if seconds else " (cached)"),
              flush=True)
        port = free_port()
        config = write_litellm_config(workdir / "litellm_config.yaml", nginx_port)
        servers["litellm"] = Server("litellm", [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port",
                                                str(port), "--num_workers", "1"], port, workdir, **common,
                                    ready_paths=("/health/liveliness",), warm_path="/health/liveliness",
                                    headers={"authorization": f"Bearer {litellm_master_key()}"}, env=litellm_env(),
                                    ready_timeout=max(args.ready_timeout, 120))
    # (name, features, workers, --base-cmd, usage.ledger, keyed); ledger None: no `usage` key, the build's
    # default; keyed: the bench key and priced models, and with LIMITS_TARGET its limits in redis_url
    builds = (("switchyard", False, 1, None, None, False), ("switchyard-features", True, 1, None, None, False),
              ("switchyard-2w", False, 2, None, None, False),
              ("switchyard-base", False, 1, args.base_cmd, None, False),
              ("switchyard-memledger", False, 1, None, "memory", False),
              ("switchyard-keyed", False, 1, None, None, True), (DB_KEY_TARGET, False, 1, None, None, True),
              (LIMITS_TARGET, False, 1, None, None, True),
              (GUARDRAILS_TARGET, False, 1, None, None, False), (CACHE_TARGET, False, 1, None, None, False),
              (ALL_ON_TARGET, True, 1, None, None, False), ("switchyard-all-base", True, 1, args.base_cmd, None, False),
              (LIMITS_2W_TARGET, False, 2, None, None, True))
    for name, features, workers, cmd, ledger, keyed in builds:
        if name in targets:
            port = free_port()
            limits_redis = redis_url if name in REDIS_TARGETS else None
            if name in REDIS_TARGETS and not redis_url:
                raise RuntimeError(f"{name} needs the run's redis-server")
            all_on = name in ALL_ON_TARGETS
            config = write_switchyard_config(workdir / f"{name}.yaml", port, nginx_port, paced_port, features,
                                             ledger, keyed=keyed, limits_redis=limits_redis,
                                             limits_timeout=args.limits_timeout if limits_redis else None,
                                             guardrails=name in (GUARDRAILS_TARGET, *ALL_ON_TARGETS),
                                             cache=name == CACHE_TARGET or all_on, semantic=all_on,
                                             otlp=f"http://127.0.0.1:{nginx_port}" if all_on else None,
                                             db_key=name in DB_KEY_TARGETS)
            headers = EXPORT_HEADERS if all_on else FEATURES_HEADERS if features else \
                KEY_HEADERS if keyed else None   # db_key_maker puts a database key's secret in place of the config key
            env = switchyard_env(workdir, name, semantic=all_on)
            servers[name] = Server(name, switchyard_argv(args, config, port, workers, cmd), port, workdir, **common,
                                   ready_paths=("/ready", "/health"), headers=headers, env=env, distinct=all_on,
                                   before_start=db_key_maker(switchyard_base(args, cmd), config, env, limits=all_on)
                                   if name in DB_KEY_TARGETS else None)
    return servers


def db_key_maker(base: list[str], config: Path, env: dict[str, str], limits: bool = False):
    """A database-key target's before_start: make the key (`limits`: with the bench's rate limit and
    budget), and send its secret instead of the config key."""
    def make(server: Server) -> None:
        secret = make_db_key(base, config, env, limits=limits)
        server.headers = {**server.headers, "authorization": f"Bearer {secret}"}
        print(f"{server.name}: database key made with {' '.join(base)} keys create ({secret[:12]}...)", flush=True)
    return make


# --------------------------------------------------------------------------- one round of one target

def wait_for_quiet(args) -> float:
    """Before repeating a disturbed phase, wait (in 1 s looks) until outside CPU falls below the threshold.

    Another benchmark next door runs for minutes, so repeating at once would
    only be disturbed again. Bounded per repeat (--quiet-wait) and per run
    (4x that), so a machine that never calms down still finishes in time.
    """
    t0 = time.monotonic()
    limit = min(args.quiet_wait, args.quiet_left)
    while time.monotonic() - t0 < limit:
        snap0, s0 = proc_snapshot(), time.monotonic()
        time.sleep(1.0)
        pct = 100 * other_cpu_seconds(snap0, proc_snapshot()) / ((time.monotonic() - s0) * (os.cpu_count() or 1))
        if pct <= args.disturbed_pct:
            break
    waited = time.monotonic() - t0
    args.quiet_left -= waited
    return waited if waited > 1.5 else 0.0


def measure(server: Server, lua: Path, args) -> dict:
    """One round for one target: wrk at each connection level (with CPU accounting), then stream bursts.

    Besides the server's own CPU, it records how much of the machine went to
    processes outside this benchmark ("other CPU %"): on a shared 2-core box
    a test suite running next door shows up there, and a phase with a high
    value is not comparable to the others.
    """
    row: dict = {"errors": 0, "repeated_phases": 0}
    ncpu = os.cpu_count() or 1
    for conns in CONNECTION_LEVELS:
        for attempt in range(args.retry_disturbed + 1):
            snap0, t0 = proc_snapshot(), time.monotonic()
            w = run_wrk(server.base + server.chat_path, lua, conns, args.duration, args.wrk_threads)
            snap1, t1 = proc_snapshot(), time.monotonic()
            other_pct = 100 * other_cpu_seconds(snap0, snap1) / ((t1 - t0) * ncpu)
            if other_pct <= args.disturbed_pct or attempt == args.retry_disturbed:
                break
            waited = wait_for_quiet(args)
            print(f"   {server.name} @{conns}: {other_pct:.0f}% CPU used outside the benchmark, repeating"
                  + (f" after {waited:.0f}s" if waited else ""), flush=True)
            row["repeated_phases"] += 1
        cpu = tree_cpu_seconds(server.proc.pid, snap1) - tree_cpu_seconds(server.proc.pid, snap0)
        row[f"c{conns}_other_cpu_pct"] = other_pct
        row[f"c{conns}_rps"] = w["rps"]
        row[f"c{conns}_p50_ms"] = w["p50_ms"]
        row[f"c{conns}_p99_ms"] = w["p99_ms"]
        row[f"c{conns}_requests"] = w["requests"]
        row[f"c{conns}_cpu_ms_per_req"] = cpu * 1e3 / w["requests"] if w["requests"] else math.nan
        row["errors"] += w["errors"] + w["non2xx"]
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} died during load:\n{server.log_tail()}")
    for streams, bursts in args.streams:
        snap0, t0 = proc_snapshot(), time.monotonic()
        s = measure_streams(server, streams, bursts)
        row[f"s{streams}_other_cpu_pct"] = 100 * other_cpu_seconds(snap0, proc_snapshot()) / (
            (time.monotonic() - t0) * ncpu)
        row.update({f"s{streams}_{k}": v for k, v in s.items()})
        row["errors"] += s["failures"]
    row["peak_rss_mb"] = memory_mb(tree_pids(proc_snapshot(), server.proc.pid), "VmHWM")
    return row


def hold_server(args, target: str, servers: dict[str, Server], workdir: Path) -> Server:
    """A fresh process of `target` whose streams (model bench-slow) come from the paced upstream.

    Switchyard gets the `switchyard` config, which routes bench-slow to the
    paced upstream; the pooled pass-through forwards everything to the paced
    upstream, which answers any model.
    """
    port, name = free_port(), f"{target}-hold"
    if target == "switchyard":
        config = write_switchyard_config(workdir / f"{name}.yaml", port, servers["direct"].port,
                                         servers["paced"].port, features=False)
        argv = switchyard_argv(args, config, port)
        ready: tuple[str, ...] = ("/ready", "/health")
    else:
        argv = passthrough_argv(target, servers["paced"].base, port)
        ready = ("/health",)  # forwarded: the paced upstream answers it
    return Server(name, argv, port, workdir, chat_path="/v1/chat/completions", stream_path="/v1/chat/completions",
                  stream_model="bench-slow", ready_paths=ready,
                  env=switchyard_env(workdir, name) if target == "switchyard" else None)


def hold_phase(args, target: str, servers: dict[str, Server], workdir: Path, failed: dict[str, str]) -> dict:
    """Open --hold streams at once on a fresh process of `target` and read its RSS while they are open.

    A fresh process, because the rounds' 500-stream bursts leave the
    measured instance's heap at its high-water mark: the figure is then what
    1,000 open streams cost, not what the run before them left behind. Its
    streams come from the paced upstream (model bench-slow), so they stay
    open for --hold-seconds. Switchyard first answers one chat and one fast
    stream (Server.check, on nginx); the pass-through has only the paced
    upstream behind it, and the hold itself checks every stream it relays.
    """
    server = servers[f"{target}-hold"] = hold_server(args, target, servers, workdir)
    print(f"holding {args.hold} streams open on a fresh {target}: {' '.join(server.argv)}", flush=True)
    try:
        server.start()
        server.wait_ready(args.ready_timeout)
        if target == "switchyard":
            server.stream_model = "bench-stream"
            server.check()
            server.stream_model = "bench-slow"
        h = hold_streams(server, args.hold)
    except (RuntimeError, httpx.HTTPError, trio.TooSlowError) as exc:
        failed[server.name] = f"holding {args.hold} streams failed: {exc}"
        return {}
    finally:
        server.stop()
    print(f"   RSS {h['rss_all_open_mb']:.0f} MB with all open (before: {h['rss_idle_mb']:.0f} MB), "
          f"{h['ok']}/{h['streams']} complete", flush=True)
    if h["ok"] < h["streams"] or h["samples_all_open"] == 0:
        failed[server.name] = f"{h['ok']}/{h['streams']} held streams complete, {h['max_open']} open at most"
    return h


def ledger_notes(workdir: Path, servers: dict[str, Server], results: dict[str, list[dict]]) -> list[str]:
    """Per Switchyard target, the rows its SQLite ledger holds after the run (the servers are stopped,
    so every record was flushed), next to the requests the load generators saw complete.

    Those are a floor, not the exact count: warm-up, checks, and repeated
    (disturbed) phases also made calls, and wrk stops counting at the end of a
    phase while the server still finishes the calls in flight. Fewer rows than
    that floor means records were lost, and the ledger's cost was not measured.
    """
    notes = []
    for name in servers:
        if not name.startswith("switchyard") or name not in results:
            continue
        try:
            rows = ledger_rows(workdir, name)
        except sqlite3.Error as exc:
            notes.append(f"Ledger of {name}: could not be read ({exc}).")
            continue
        if rows is None:
            continue   # an in-memory ledger, or a build without one
        seen = sum(r.get(f"c{c}_requests", 0) for r in results.get(name, []) for c in CONNECTION_LEVELS)
        seen += sum(r.get(k, 0) for r in results.get(name, []) for k in r if k.endswith("_streams_ok"))
        verdict = "none lost" if rows >= seen else "**fewer rows than completed requests: records were lost**"
        notes.append(f"Ledger of {name} (SQLite, {workdir / (name + '-data')}): {rows:,} rows after the run; "
                     f"the load generators saw {seen:,} requests complete in the measured phases ({verdict}).")
    return notes


# --------------------------------------------------------------------------- rate limits on Redis

def command_stats(redis: Redis) -> dict[str, dict]:
    """Redis INFO commandstats: per command, its calls, µs in total and per call."""
    stats = {}
    for line in redis.cli("info", "commandstats").splitlines():
        m = re.match(r"cmdstat_([\w|]+):calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)", line.strip())
        if m:
            stats[m.group(1)] = {"calls": int(m.group(2)), "usec": int(m.group(3)),
                                 "usec_per_call": float(m.group(4))}
    return stats


def script_calls(stats: dict[str, dict]) -> int:
    return sum(v["calls"] for k, v in stats.items() if k in ("evalsha", "eval"))


def settled_scripts(redis: Redis, quiet: float = 0.3, limit: float = 10.0) -> int:
    """The scripts Redis has run, once the count has stood still for `quiet` seconds (at most `limit`):
    settles run after the answer, off the request path, and may still be queued when the load stops."""
    calls, deadline = script_calls(command_stats(redis)), time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = script_calls(command_stats(redis))
        if now == calls:
            break
        calls = now
    return calls


def outages_logged(server: Server) -> int:
    """How many times the gateway's limiter has logged Redis as unavailable (its admissions then go to
    state.on_unavailable: the local share under fail_open)."""
    return server.log_path.read_text(errors="replace").count("is unavailable (")


def scrape_limits(server: Server, redis: Redis) -> dict:
    """rate_limit_admission_seconds (cumulative buckets by upper bound, count, sum) and the refusals
    counted so far, from the server's /metrics; the scripts Redis has run (settles drained) and the
    outages the limiter has logged so far."""
    scripts = settled_scripts(redis)
    text = httpx.get(server.base + "/metrics", timeout=10.0).text
    out: dict = {"buckets": {}, "count": 0.0, "sum": 0.0, "refusals": 0.0, "scripts": scripts,
                 "outages": outages_logged(server), "fallback": 0.0, "batches": 0.0}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith(ADMISSION + "_bucket{"):
            m = re.search(r'le="([^"]+)"', name)
            out["buckets"][float(m.group(1))] = float(value)
        elif name == ADMISSION + "_count":
            out["count"] = float(value)
        elif name == ADMISSION + "_sum":
            out["sum"] = float(value)
        elif name.startswith(REFUSALS):
            out["refusals"] += float(value)
        elif name == "rate_limit_fallback_admissions_total":
            out["fallback"] = float(value)
        elif name == "rate_limit_admission_scripts_total":
            out["batches"] = float(value)
    if not out["buckets"]:
        raise RuntimeError(f"{server.name}: no {ADMISSION} on /metrics")
    return out


def admission_between(before: dict, after: dict) -> dict:
    """The admissions between two scrapes: their histogram, count, mean, p50/p99 bounds, refusals, the
    scripts Redis ran meanwhile, the admission script calls among them (each decides a batch), and the
    admissions the local share decided while Redis was deemed away (rate_limit_fallback_admissions)."""
    buckets = {le: after["buckets"][le] - before["buckets"].get(le, 0.0) for le in sorted(after["buckets"])}
    count, total = after["count"] - before["count"], after["sum"] - before["sum"]
    out = {"buckets": buckets, "count": count, "mean_s": total / count if count else math.nan,
           "refusals": after["refusals"] - before["refusals"], "scripts": after["scripts"] - before["scripts"],
           "outages": after["outages"] - before["outages"], "fallback": after["fallback"] - before["fallback"],
           "batches": after["batches"] - before["batches"]}
    for q in (0.5, 0.99):
        lo, hi, est = bucket_quantile(buckets, q)
        out[f"p{round(q * 100)}"] = {"low_s": lo, "high_s": hi, "interpolated_s": est}
    return out


def one_connection(args, servers: dict[str, Server], lua: dict[str, Path], targets: list[str],
                   redis: Redis) -> dict:
    """wrk at 1 connection on switchyard-keyed and switchyard-limits in turn (--duration each), and the
    admissions of that phase: with nothing queued in the worker, the time a call spends in admission is
    the Redis round trip and the client's own work, and the latency difference is what the limits add.
    Under the rounds' 32-128 connections it also holds the event loop's turn, which wakes it after the
    reply, so both figures are reported."""
    out: dict = {}
    for t in ("switchyard-keyed", LIMITS_TARGET):
        if t not in targets:
            continue
        before = scrape_limits(servers[t], redis) if t == LIMITS_TARGET else None
        snap0, t0 = proc_snapshot(), time.monotonic()
        w = run_wrk(servers[t].base + servers[t].chat_path, lua[t], 1, args.duration, 1)
        other = 100 * other_cpu_seconds(snap0, proc_snapshot()) / ((time.monotonic() - t0) * (os.cpu_count() or 1))
        out[t] = {k: w[k] for k in ("rps", "p50_ms", "p99_ms", "requests")}
        out[t].update(errors=w["errors"] + w["non2xx"], other_cpu_pct=other)
        if before is not None:
            out["admission"] = admission_between(before, scrape_limits(servers[t], redis))
    return out


def limiter_evidence(server: Server, redis: Redis, results: list[dict]) -> dict:
    """What shows the rounds went through the shared limiter: the rate headers of the key's answers, the
    keys the scripts left in Redis, how many scripts Redis ran (and its CPU for them), and the
    limiter's warnings (an outage would have sent admissions to the local share)."""
    r = httpx.post(server.base + server.chat_path, json=CHAT_REQUEST, headers=server.headers, timeout=30.0)
    headers = {k: v for k, v in r.headers.items() if k.startswith("x-ratelimit-")}
    keys = redis.cli("--scan", "--pattern", "sy:*").split()
    stats = command_stats(redis)
    log = server.log_path.read_text(errors="replace")
    served = sum(row.get(f"c{c}_requests", 0) for row in results for c in CONNECTION_LEVELS)
    served += sum(row.get(k, 0) for row in results for k in row if k.endswith("_streams_ok"))
    return {"status": r.status_code, "rate_headers": headers, "keys": len(keys), "key_sample": sorted(keys)[:8],
            "commandstats": stats, "redis_cpu_s": tree_cpu_seconds(redis.proc.pid),
            "limiter_warnings": [line for line in log.splitlines() if "rate limits:" in line],
            "down_s": sum(float(m) for m in re.findall(r"is back after ([\d.]+)s", log)),
            "requests_seen": served}


def _ms(v: float | None) -> str:
    return "n/a" if v is None or math.isnan(v) else f"{v * 1e3:.3g}"


def admission_text(admission: dict) -> str:
    """'N admissions, p50 in the bucket (a, b] ms (interpolated c ms); p99 ...; mean ...; refusals; buckets'."""
    parts = []
    for q in ("p50", "p99"):
        b = admission[q]
        parts.append(f"{q} in the bucket ({_ms(b['low_s'])}, {_ms(b['high_s'])}] ms "
                     f"(interpolated {_ms(b['interpolated_s'])} ms)")
    in_redis = admission["count"] - admission["fallback"]
    batched = (f"; {admission['batches']:,.0f} admission script calls decided them, "
               f"{in_redis / admission['batches']:.1f} per call" if admission["batches"] else "")
    if admission["outages"] or admission["fallback"]:
        where = (f"Redis deemed unavailable {admission['outages']} times: {in_redis:,.0f} decided in Redis, "
                 f"{admission['fallback']:,.0f} by the local share{batched}")
    else:
        where = f"every one decided in Redis: no outage logged{batched}"
    return (f"{admission['count']:,.0f} admissions ({where}), " + "; ".join(parts)
            + f"; mean {_ms(admission['mean_s'])} ms (histogram sum/count); refusals ({REFUSALS}): "
            f"{admission['refusals']:.0f}; cumulative buckets (ms: calls): "
            + ", ".join(f"{_ms(le)}: {n:,.0f}" for le, n in admission["buckets"].items()))


def _message(line: str) -> str:
    """A JSON log line's message (the line itself if it is not JSON)."""
    try:
        return str(json.loads(line)["message"])
    except (ValueError, KeyError, TypeError):
        return line.strip()


def limits_notes(admission: dict | None, evidence: dict | None, single: dict | None) -> list[str]:
    notes = []
    if admission:
        notes.append(f"Admission on {LIMITS_TARGET} under the rounds' load ({ADMISSION} on /metrics, read "
                     f"before round 1 and after the last, so the measured rounds only): {admission_text(admission)}.")
    if single:
        rows = [f"{t}: {v['rps']:.0f} req/s, p50 {v['p50_ms']:.2f} ms, p99 {v['p99_ms']:.2f} ms, "
                f"{v['errors']} errors, other CPU {v['other_cpu_pct']:.0f} %" for t, v in single.items()
                if t != "admission"]
        notes.append("At 1 connection (wrk -c1, one phase each after the rounds): " + "; ".join(rows)
                     + (f". Admission in that phase: {admission_text(single['admission'])}."
                        if single.get("admission") else "."))
    if evidence:
        calls = sum(v["calls"] for k, v in evidence["commandstats"].items() if k in ("evalsha", "eval"))
        sha = evidence["commandstats"].get("evalsha", {})
        warnings = evidence["limiter_warnings"]
        outages = sum("is unavailable" in w for w in warnings)
        notes.append(
            f"Limiter evidence ({LIMITS_TARGET}): a chat after the rounds answered {evidence['status']} with "
            + (", ".join(f"{k}: {v}" for k, v in sorted(evidence["rate_headers"].items()))
               or "**no x-ratelimit-* headers**")
            + f"; Redis holds {evidence['keys']} `sy:*` keys (e.g. "
            + ", ".join(f"`{k}`" for k in evidence["key_sample"][:4]) + f"); Redis ran {calls:,} script calls "
            f"(EVALSHA: {sha.get('usec_per_call', math.nan):.1f} µs each inside Redis) for "
            f"{evidence['requests_seen']:,} requests the load generators saw complete (one admission and one settle "
            f"each, plus warm-up and checks); redis-server used {evidence['redis_cpu_s']:.1f} s of CPU over the "
            f"whole run ({1e6 * evidence['redis_cpu_s'] / calls if calls else math.nan:.0f} µs per script call, "
            f"not counted in the gateway's CPU ms/req); limiter warnings in the log: "
            + (f"**{len(warnings)}**, {outages} of them an outage (its admissions went to the local share, "
               f"state.on_unavailable: fail_open; {evidence['down_s']:.1f} s down in all), the first: "
               f"`{_message(warnings[0])}`" if warnings else "none")
            + ".")
    return notes


# --------------------------------------------------------------------------- profiling

def profile_phase(server: Server, load, duration: float, out_prefix: str) -> tuple[Path, Path]:
    """py-spy attached to the server tree while `load()` runs; writes collapsed stacks and a top-functions report.

    `load` puts the load on and returns the report's title (what ran, at what rate).
    """
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(pyspy).exists() and not shutil.which(pyspy):
        raise RuntimeError("py-spy not found: /tmp/probe/bin/pip install py-spy")
    collapsed = Path(out_prefix + ".collapsed.txt")
    argv = [pyspy, "record", "--pid", str(server.proc.pid), "--subprocesses", "--format", "raw",
            "--rate", "200", "--duration", str(int(duration) + 2), "--output", str(collapsed)]
    spy = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        time.sleep(1.0)  # let py-spy attach before load starts
        title = load()
        out, _ = spy.communicate(timeout=duration + 30)
        if spy.returncode != 0 or not collapsed.exists():
            raise RuntimeError(f"py-spy failed ({spy.returncode}): {out.decode(errors='replace')[-500:]}")
    finally:
        if spy.poll() is None:
            os.killpg(spy.pid, signal.SIGKILL)
            spy.wait()
    report = Path(out_prefix + ".top.txt")
    report.write_text(top_functions(collapsed.read_text(), title))
    return report, collapsed


def wrk_load(server: Server, lua: Path, connections: int, duration: float, threads: int):
    """The profiled wrk phase: `connections` connections for `duration` seconds."""
    def load() -> str:
        rps = run_wrk(server.base + server.chat_path, lua, connections, duration, threads)["rps"]
        return f"{server.name}, wrk {connections} connections, {duration:g}s, {rps:.0f} req/s under profiling"
    return load


def stream_load(server: Server, streams: int, duration: float):
    """The profiled stream phase: bursts of `streams` simultaneous streams on connections opened once,
    about as many as fit in `duration` (py-spy records that long)."""
    def load() -> str:
        t0 = time.monotonic()
        measure_streams(server, streams, 1)   # opens the connections too: sizes the rest
        bursts = max(1, int((duration - (time.monotonic() - t0)) / max(time.monotonic() - t0, 0.05) * 2))
        measure_streams(server, streams, bursts)
        return f"{server.name}, {bursts + 1} bursts of {streams} streams under profiling"
    return load


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


# --------------------------------------------------------------------------- main

def parse_streams(text: str) -> list[tuple[int, int]]:
    """'100:3,500:1' -> [(100, 3), (500, 1)]: concurrent streams and bursts per round."""
    out = []
    for part in text.split(","):
        n, _, b = part.partition(":")
        out.append((int(n), int(b or 1)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per wrk phase")
    parser.add_argument("--targets", default=DEFAULT_TARGETS, help="comma list of " + ",".join(ALL_TARGETS))
    parser.add_argument("--out", type=Path, help="write the markdown summary here")
    parser.add_argument("--json", type=Path, help="write raw per-round numbers here")
    parser.add_argument("--wrk-threads", type=int, default=1,
                        help="wrk threads; 1 leaves the second core to the server on a 2-core box")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of wrk per target before round 1")
    parser.add_argument("--streams", type=parse_streams, default=parse_streams("100:2,500:1"),
                        help="concurrent streams:bursts per round, comma separated (default 100:2,500:1)")
    parser.add_argument("--hold", type=int, default=1000,
                        help="streams switchyard and passthrough-pool each hold open at once (0: skip)")
    parser.add_argument("--hold-seconds", type=float, default=10.0,
                        help="how long each held stream lasts (20 chunks paced over it)")
    parser.add_argument("--scrape-interval", type=float, default=1.0, help="/metrics scrapes of switchyard-features")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "switchyard-bench",
                        help="where LiteLLM's venv is installed and reused")
    parser.add_argument("--litellm-python", default=sys.executable, help="interpreter that creates LiteLLM's venv")
    parser.add_argument("--switchyard-cmd", help="command before 'serve ...' (default: switchyard console "
                        "script next to this python, else python -m switchyard.protocol.serving.cli)")
    parser.add_argument("--base-cmd", help="command before 'serve ...' for the switchyard-base target: another "
                        "build, e.g. '/tmp/old-venv/bin/switchyard' (that build installed in a venv of its own)")
    parser.add_argument("--limits-timeout", type=float, help="state.operation_timeout (seconds) of "
                        f"{LIMITS_TARGET}; default: the build's. A Redis call that takes longer (event-loop "
                        "wait included) sends admissions to the local share until a probe succeeds")
    parser.add_argument("--profile", action="store_true",
                        help="after the rounds, py-spy profiles one wrk phase and one of stream bursts")
    parser.add_argument("--profile-target", default="switchyard")
    parser.add_argument("--ready-timeout", type=float, default=30.0)
    parser.add_argument("--disturbed-pct", type=float, default=10.0,
                        help="a wrk phase during which processes outside the benchmark used more than this %% "
                        "of the machine's CPU counts as disturbed ...")
    parser.add_argument("--retry-disturbed", type=int, default=1, help="... and is repeated up to this many times")
    parser.add_argument("--quiet-wait", type=float, default=20.0,
                        help="seconds to wait for outside CPU to calm down before a repeat (4x per run at most)")
    args = parser.parse_args()
    args.quiet_left = 4 * args.quiet_wait
    started = time.monotonic()

    targets = [t for t in ALL_TARGETS if t in args.targets.split(",")]
    unknown = set(args.targets.split(",")) - set(ALL_TARGETS)
    if unknown or not targets:
        parser.error(f"unknown targets {sorted(unknown)}")
    for tool in ("nginx", "wrk"):
        if not shutil.which(tool):
            parser.error(f"{tool} not on PATH: apt-get install -y nginx-light wrk")
    for t in REDIS_TARGETS:
        if t in targets and not all(Path(p).exists() for p in (Redis.SERVER, Redis.CLI)):
            parser.error(f"{t} needs {Redis.SERVER} and {Redis.CLI}: apt-get install -y redis-server")
    for t in ("switchyard-base", "switchyard-all-base"):
        if t in targets and not args.base_cmd:
            parser.error(f"the {t} target needs --base-cmd")
    if args.profile and args.profile_target not in targets:
        parser.error("--profile-target must be one of --targets")
    raise_fd_limit(4 * max([args.hold] + [n for n, _ in args.streams]) + 1024)

    # Watchdog: whatever hangs, the run ends and the finally blocks stop every child.
    phase = 2 * (args.duration + 2) * (1 + args.retry_disturbed) + sum(5 + b * (n / 20) for n, b in args.streams)
    budget = int(len(targets) * (args.rounds * phase + args.warmup + 10 + args.ready_timeout) + 300
                 + 4 * args.quiet_wait + (1000 if "litellm" in targets else 0)
                 + len(holds(args, targets)) * (args.hold_seconds + args.ready_timeout + 60)
                 + (2 * args.duration + 80 if args.profile else 0))

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
    results: dict[str, list[dict]] = {t: [] for t in targets}
    hold: dict[str, dict] = {}
    failed: dict[str, str] = {}
    notes: list[str] = []
    servers: dict[str, Server] = {}
    lua: dict[str, Path] = {}
    redis: Redis | None = None
    admission: dict | None = None
    evidence: dict | None = None
    single: dict | None = None
    scraped: dict | None = None

    def drop(name: str, reason: str) -> None:
        """A broken Switchyard (say, mid-development) is reported and left out; the rest still run."""
        print(f"!! {name} {reason}", flush=True)
        failed[name] = reason
        if name in targets:
            targets.remove(name)
        servers[name].stop()

    command = " ".join(shlex.quote(a) for a in ["python", "tests/perf/bench.py", *sys.argv[1:]])
    try:
        if any(t in targets for t in REDIS_TARGETS):
            redis = Redis(workdir)
            print(f"starting redis: {' '.join(shlex.quote(a) for a in redis.argv)}", flush=True)
            redis.start()
        servers.update(build_servers(args, targets, workdir, redis.url if redis else None))
        for server in servers.values():
            print(f"starting {server.name}: {' '.join(server.argv)}", flush=True)
            try:
                server.start()
                server.wait_ready(args.ready_timeout)
                if server.name != "paced":
                    server.check()
            except (RuntimeError, httpx.HTTPError, ValueError) as exc:
                if not server.name.startswith("switchyard"):
                    raise RuntimeError(f"{server.name} failed to start or to answer: {exc}") from exc
                drop(server.name, f"failed to start: {exc}")
            lua[server.name] = write_wrk_lua(workdir / f"post-{server.name}.lua", CHAT_REQUEST, server.headers,
                                             distinct=server.distinct)
        for t in list(targets):
            try:
                if args.warmup > 0:
                    run_wrk(servers[t].base + servers[t].chat_path, lua[t], 32, args.warmup, args.wrk_threads)
                measure_streams(servers[t], args.streams[0][0], 1)
            except (subprocess.SubprocessError, trio.TooSlowError) as exc:
                if not t.startswith("switchyard"):
                    raise
                drop(t, f"failed in warm-up: {exc}")
        if LIMITS_TARGET in targets:
            try:
                scraped = scrape_limits(servers[LIMITS_TARGET], redis)
            except (RuntimeError, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
                failed[f"{LIMITS_TARGET} /metrics"] = f"could not be read before round 1: {exc}"
        for rnd in range(1, args.rounds + 1):
            for t in list(targets):
                try:
                    if t in SCRAPED_TARGETS:
                        with Scraper(servers[t].base + "/metrics", args.scrape_interval) as scraper:
                            row = measure(servers[t], lua[t], args)
                        row.update(scrapes=scraper.scrapes, scrape_failures=scraper.failures)
                        row["errors"] += scraper.failures
                    else:
                        row = measure(servers[t], lua[t], args)
                except (RuntimeError, subprocess.SubprocessError, trio.TooSlowError) as exc:
                    if not t.startswith("switchyard"):
                        raise
                    drop(t, f"failed in round {rnd}: {exc}")
                    continue
                results[t].append(row)
                streams = " ".join(f"ttfc{n} {row[f's{n}_ttfc_p50_ms']:.0f}ms" for n, _ in args.streams)
                print(f"round {rnd} {t:20s} req/s@32 {row['c32_rps']:6.0f} p99 {row['c32_p99_ms']:7.1f}ms | "
                      f"req/s@128 {row['c128_rps']:6.0f} p99 {row['c128_p99_ms']:7.1f}ms | cpu/req "
                      f"{row['c128_cpu_ms_per_req']:.2f}ms | {streams} | rss {row['peak_rss_mb']:.0f}MB | errors "
                      f"{row['errors']} | other cpu {row['c32_other_cpu_pct']:.0f}%/{row['c128_other_cpu_pct']:.0f}%",
                      flush=True)
        if LIMITS_TARGET in targets and redis is not None:
            try:
                if scraped is not None:
                    admission = admission_between(scraped, scrape_limits(servers[LIMITS_TARGET], redis))
                single = one_connection(args, servers, lua, targets, redis)
                evidence = limiter_evidence(servers[LIMITS_TARGET], redis, results[LIMITS_TARGET])
            except (RuntimeError, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
                failed[f"{LIMITS_TARGET} limiter"] = f"could not be checked after the rounds: {exc}"
        for t in holds(args, targets):
            hold[t] = hold_phase(args, t, servers, workdir, failed)
        if args.profile and args.profile_target in targets:
            prefix = str((args.out.parent / args.out.stem) if args.out else workdir / "bench")
            prefix += f"-profile-{args.profile_target}"
            server = servers[args.profile_target]
            loads = [("", "wrk 128 connections",
                      wrk_load(server, lua[args.profile_target], 128, args.duration, args.wrk_threads)),
                     ("-streams", "100 simultaneous streams", stream_load(server, 100, args.duration))]
            for suffix, what, load in loads:
                try:
                    report, collapsed = profile_phase(server, load, args.duration, prefix + suffix)
                except (RuntimeError, subprocess.SubprocessError) as exc:
                    print(f"!! profile failed: {exc}", flush=True)
                    notes.append(f"Profile ({what}) failed: {exc}")
                else:
                    print(f"profile: {report} (collapsed stacks: {collapsed})", flush=True)
                    top = report.read_text().split("## inclusive")[0].strip().splitlines()
                    notes.append(f"Profile, {what} (py-spy; {report.name}), self time, top 15:\n\n```\n"
                                 + "\n".join(top[:19]) + "\n```")
    finally:
        signal.alarm(0)
        for server in reversed(list(servers.values())):
            server.stop()
        if redis is not None:
            redis.stop()

    notes += limits_notes(admission, evidence, single)
    notes += ledger_notes(workdir, servers, results)
    elapsed = time.monotonic() - started
    info = machine_info()
    info["litellm"] = litellm_pin().split("==")[-1] if "litellm" in results else None
    results = {t: rows for t, rows in results.items() if rows}
    hold = {k: v for k, v in hold.items() if v}
    md = render_markdown(results, hold, args, info, command, elapsed, notes, failed)
    print()
    print(md)
    if args.out:
        args.out.write_text(md)
        print(f"wrote {args.out}")
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "command": command, "elapsed_s": elapsed,
                                         "results": results, "hold": hold, "failed": failed,
                                         "admission": admission, "one_connection": single,
                                         "limiter": evidence}, indent=1))
        print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
