"""Instructions per call, in-process: what each feature costs, as a count that does not drift.

The wrk benchmark's ratios move by a third between rounds on a shared
2-core machine, and one feature's few percent vanish in that. An
instruction count does not move: this tool drives the benchmark's config
over ASGI in-process (no hypercorn, no load generator: the part of a call
that is Switchyard's own, plus the upstream pool and its sockets) against
the benchmark's nginx, under valgrind's cachegrind, and reports
instructions per call: the count of a run of N + 50 calls less one of 50
calls, over N, both after the same warm-up, with the collector set as a
worker sets it. Two runs of one build agree to about 0.5 % (the variants
with Redis to about 2 %: how many calls share a script call moves with the
machine's load). Work timed by an interval (the ledger's batches, the span
export) runs with its interval at the longest (``stretched``), so that it
comes in batches as large as a busy worker's instead of fifty times as
many small ones.

Variants (each a config of tests/perf/targets.py):

  floor       the pooled pass-through's app (tests/perf/passthrough.py --client pool)
  plain       `switchyard`: no keys, tracing off, the SQLite ledger
  memledger   plain with the ledger in memory (switchyard-memledger): vs plain, the SQLite ledger's cost
  keyed       the bench API key and priced models (switchyard-keyed)
  limits      keyed, with the key's rate limit and budget in a redis-server (switchyard-limits)
  features    key, request_params policy, fallback chains, tracing headers (switchyard-features)
  guardrails  every built-in detector on both stages (switchyard-guardrails)
  otlp        features, with spans exported at 10 % sampling to nginx, which drops them: vs features
  all         features + limits + guardrails + otlp (switchyard-all before its database key and response cache)
  all-dbkey   all with its key, limits and budget in the database (`keys create`), as switchyard-all has it
  all-exact   all-dbkey with the exact response cache, every lookup missing (each call's text differs), and no
              fallback chain (a model with one bypasses the cache; switchyard-all has none)
  all-semantic  all-exact with the semantic cache missing too: switchyard-all's config (an embeddings call per
              call to nginx's /embed, a new random 1,536-dimension vector each; OPENBLAS_NUM_THREADS=1); its
              index is filled to its bound (semantic.max_entries) before counting, as in a long run
  features-no-key, features-no-policy, features-no-fallback, features-no-tracing
              features less its API keys, its request_params policy, its fallback chains or its
              tracing (turned off): against features, the cost of that part alone

    python tests/perf/instructions.py --variants floor,plain,all
    python tests/perf/instructions.py --child plain --calls 200   # one run, no valgrind: prints CPU per call
    python tests/perf/instructions.py --child plain --calls 3000 --steps   # and trio's task steps per call
    python tests/perf/instructions.py --child all-semantic --calls 1000 --profile /tmp/p.pstats   # cProfile them
    python tests/perf/instructions.py --variants all-exact,all-semantic --keep /tmp/cg   # then by C function:
    cg_diff /tmp/cg/all-semantic-50.cachegrind /tmp/cg/all-semantic-450.cachegrind > /tmp/d; cg_annotate /tmp/d

Needs valgrind and nginx; redis-server for limits and the all variants. Talks only to
127.0.0.1; every process it starts is stopped in a ``finally``, and each
run is bounded by --timeout.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

VARIANTS = ("floor", "plain", "memledger", "keyed", "limits", "features", "guardrails", "otlp", "all",
            "all-dbkey", "all-exact", "all-semantic",
            "features-no-key", "features-no-policy", "features-no-fallback", "features-no-tracing")
ALL = {"features", "limits", "guardrails", "otlp"}
PARTS = {"floor": set(), "plain": set(), "memledger": {"memledger"}, "keyed": {"keyed"}, "limits": {"keyed", "limits"},
         "features": {"features"}, "guardrails": {"guardrails"}, "otlp": {"features", "otlp"},
         "all": ALL, "all-dbkey": ALL | {"dbkey"}, "all-exact": ALL | {"dbkey", "cache", "drop:fallback"},
         "all-semantic": ALL | {"dbkey", "cache", "semantic"},   # switchyard-all (semantic leaves fallback out)
         # features less one of its parts: against features, that part's own cost
         "features-no-key": {"features", "drop:api_keys"}, "features-no-policy": {"features", "drop:request_params"},
         "features-no-fallback": {"features", "drop:fallback"}, "features-no-tracing": {"features", "drop:tracing"}}
BASE_CALLS = 50   # the shorter run's calls: start-up and teardown cancel out in the difference
CONCURRENCY = 32


# --------------------------------------------------------------------------- the child: one run of calls

def child(variant: str, calls: int, warm: int, nginx_port: int, redis_url: str | None, workdir: Path,
          stream: bool = False, steps: bool = False, profile: Path | None = None) -> None:
    os.environ.update(environment(variant, workdir))   # before numpy's import: OPENBLAS_NUM_THREADS
    import trio
    from targets import EXPORT_HEADERS, FEATURES_HEADERS, MESSAGES

    from switchyard.protocol.http.asgi import CLIENT_GONE, GoneHook

    parts = PARTS[variant]
    config = workdir / f"{variant}.yaml"   # written by the parent (write_config), with its database key
    secret = (workdir / f"{variant}.key").read_text() if "dbkey" in parts else None
    auth = f"Bearer {secret}" if secret else FEATURES_HEADERS["authorization"]
    key = [(b"authorization", auth.encode())]
    headers = [(b"content-type", b"application/json"), (b"host", b"127.0.0.1")]
    sent = {**(EXPORT_HEADERS if "otlp" in parts else FEATURES_HEADERS), "authorization": auth}
    headers += [(k.encode(), v.encode()) for k, v in sent.items()] if "features" in parts else \
        key if "keyed" in parts else []
    # --stream: the bench's 20-chunk stream (the floor forwards it to nginx's /stream, as the bench does)
    body = json.dumps({"model": "bench-stream", "messages": MESSAGES, "stream": True} if stream else
                      {"model": "bench", "messages": MESSAGES}).encode()
    # With the response cache, every call's text is its own (the bench's distinct load): every lookup misses.
    text = json.dumps(MESSAGES[-1]["content"]).encode()
    head, tail = body.rsplit(text, 1)
    numbered = itertools.count() if "cache" in parts else None
    path = "/stream/v1/chat/completions" if stream and variant == "floor" else "/v1/chat/completions"
    scope = {"type": "http", "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": headers, "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8080)}

    async def one(app) -> None:
        given, done, status = False, trio.Event(), []

        async def receive() -> dict:
            nonlocal given
            if not given:
                given = True
                data = body if numbered is None else b'%s%s-%d"%s' % (head, text[:-1], next(numbered), tail)
                return {"type": "http.request", "body": data, "more_body": False}
            await done.wait()   # as hypercorn does: a disconnect once the whole response is out
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif not message.get("more_body"):
                done.set()

        # The hook the gateway's own hypercorn connection puts in every request's scope (client_eof.py): a
        # call under it hears of a client that left from the server and starts no task to wait for it.
        await app({**scope, "extensions": {CLIENT_GONE: GoneHook()}}, receive, send)
        if status != [200]:
            raise RuntimeError(f"{variant}: a call answered {status}")

    async def load(app, n: int) -> None:
        left = [n]

        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                await one(app)
        async with trio.open_nursery() as nursery:
            for _ in range(CONCURRENCY):
                nursery.start_soon(worker)

    async def main() -> None:
        if variant == "floor":
            from passthrough import make_app
            app_cm = _lifespan(make_app(f"http://127.0.0.1:{nginx_port}", 256, "pool"))
        else:
            from tests.harness import gateway
            app_cm = gateway(config.read_text(), base_dir=workdir)
        async with app_cm as app:
            await load(app, warm)
            await flush_spans(app)   # the export's first-time costs (imports, its connection) before counting
            if "semantic" in parts:
                fill_index(app)
            from switchyard.protocol.serving.workers import GC_YOUNG_THRESHOLD
            gc.collect()
            gc.freeze()
            gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)   # as a worker runs (protocol/serving/workers.py)
            cpu = time.process_time()
            if counter is not None:
                trio.lowlevel.add_instrument(counter)
            profiler = cProfile.Profile() if profile is not None else None
            if profiler is not None:
                profiler.enable()
            await load(app, calls)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(profile)
            if counter is not None:
                trio.lowlevel.remove_instrument(counter)
                counter.report(calls)
            print(f"{variant}: {calls} {'streams' if stream else 'calls'}, "
                  f"{(time.process_time() - cpu) / calls * 1e6:.0f} us of CPU each",
                  flush=True)
            await flush_spans(app)   # every run exports all its spans, none cut short by the close's timeout

    counter = TaskSteps() if steps else None
    trio.run(main)


class TaskSteps:
    """A trio instrument: scheduler steps per task name over the counted calls (``--steps``). A task
    spawned per call shows as one step or more per call; the floor's call takes two in all."""

    def __init__(self) -> None:
        self.steps: dict[str, int] = {}
        self.spawned: dict[str, int] = {}

    def before_task_step(self, task) -> None:
        self.steps[task.name] = self.steps.get(task.name, 0) + 1

    def task_spawned(self, task) -> None:
        self.spawned[task.name] = self.spawned.get(task.name, 0) + 1

    def report(self, calls: int) -> None:
        print(f"task steps per call: {sum(self.steps.values()) / calls:.2f}")
        for name, n in sorted(self.steps.items(), key=lambda item: -item[1]):
            if n / calls >= 0.005:
                print(f"  {n / calls:6.2f} steps, {self.spawned.get(name, 0) / calls:5.2f} spawned  {name}")


def fill_index(app) -> None:
    """The semantic index at its bound (semantic.max_entries), as in a run of switchyard-all past its first
    2,000 calls: every lookup then multiplies the whole matrix, and every miss's entry evicts the oldest.
    The warm-up's calls made its one namespace; the filling rows are random, so no lookup finds them."""
    import numpy as np
    import trio

    index = app.runtime.cache.semantic.index
    namespaces = {namespace for namespace, _ in index._order}
    if len(namespaces) != 1:
        raise RuntimeError(f"the warm-up left {len(namespaces)} semantic namespaces, not one")
    namespace = namespaces.pop()
    dim = index._spaces[namespace].buf.shape[1]
    rng, expires = np.random.default_rng(44), trio.current_time() + 86400.0
    for i in range(index.max_entries - index.entries):
        index.add(namespace, rng.standard_normal(dim).tolist(), b"fill-%d" % i, expires)


async def flush_spans(app) -> None:
    """Export the spans queued so far (with tracing.otlp), waiting for it in a worker thread."""
    import trio

    spans = getattr(getattr(app, "runtime", None), "spans", None)
    if spans is not None:
        await trio.to_thread.run_sync(spans.processor.force_flush)


def without(text: str, section: str) -> str:
    """``text`` with its top-level ``section`` removed; tracing, on by default, is turned off instead."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith(f"{section}:"):
            skipping = True
            continue
        if skipping and line.strip() and not line[0].isspace():
            skipping = False
        if not skipping:
            out.append(line)
    if section == "tracing":
        out.append("tracing:\n  enabled: false\n")
    return "".join(out)


def stretched(text: str) -> str:
    """The config with the intervals that time background work at their longest.

    Under valgrind a call takes about 50 times as long, so work done once per
    interval (the ledger's batch, the span export) would run 50 times as
    often per call as it does in production, in batches a fiftieth the size.
    At the longest interval each run writes its records and exports its spans
    in about as few batches as a busy worker does (500 records a batch, and
    the spans of seconds of calls), at the process's end if not before.
    """
    assert "flush_interval" not in text and "export_interval" not in text
    if "\nusage:\n" in text:
        text = text.replace("\nusage:\n", "\nusage:\n  flush_interval: 60\n")
    else:
        text += "usage:\n  flush_interval: 60\n"
    return text.replace("sampling_ratio: 0.1}", "sampling_ratio: 0.1, export_interval: 60}")


@contextlib.asynccontextmanager
async def _lifespan(app):
    """A bare ASGI app started by its lifespan, as hypercorn starts it."""
    import trio

    started = trio.Event()
    messages = iter([{"type": "lifespan.startup"}])

    async def receive() -> dict:
        for message in messages:
            return message
        await trio.sleep_forever()

    async def send(message: dict) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, receive, send)
        await started.wait()
        yield app
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- the parent: valgrind, twice per variant

def write_config(variant: str, workdir: Path, nginx_port: int, redis_url: str | None) -> Path:
    """The variant's config from tests/perf/targets.py's builder, with its parts dropped and its intervals
    stretched, at <workdir>/<variant>.yaml; with a database key, the key made (`keys create`, as bench.py
    makes switchyard-all's) and its secret at <workdir>/<variant>.key."""
    from targets import free_port, make_db_key, write_switchyard_config

    parts = PARTS[variant]
    config = write_switchyard_config(
        workdir / f"{variant}.yaml", free_port(), nginx_port, free_port(), features="features" in parts,
        keyed="keyed" in parts, limits_redis=redis_url if "limits" in parts else None,
        guardrails="guardrails" in parts, otlp=f"http://127.0.0.1:{nginx_port}" if "otlp" in parts else None,
        ledger="memory" if "memledger" in parts else None, cache="cache" in parts, semantic="semantic" in parts,
        db_key="dbkey" in parts)
    text = config.read_text()
    for part in parts:
        if part.startswith("drop:"):
            text = without(text, part[len("drop:"):])
    config.write_text(stretched(text))
    if "dbkey" in parts:
        secret = make_db_key([sys.executable, "-m", "switchyard.protocol.serving.cli"], config,
                             environment(variant, workdir), limits="limits" in parts)
        (workdir / f"{variant}.key").write_text(secret)
    return config


def environment(variant: str, workdir: Path) -> dict[str, str]:
    """The child's environment: targets.switchyard_env's (its data dir, OPENBLAS_NUM_THREADS=1 with the
    semantic cache)."""
    from targets import switchyard_env

    return switchyard_env(workdir, variant, semantic="semantic" in PARTS[variant])


def instructions(args, variant: str, calls: int, nginx_port: int, redis_url: str | None, workdir: Path) -> int:
    """cachegrind's instruction count of one child run of `calls` calls."""
    out = args.keep / f"{variant}-{calls}.cachegrind" if args.keep else "/dev/null"
    argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
            sys.executable, str(Path(__file__).resolve()), "--child", variant, "--calls", str(calls),
            "--warm", str(args.warm), "--nginx-port", str(nginx_port), "--workdir", str(workdir)]
    if args.stream:
        argv.append("--stream")
    if redis_url:
        argv += ["--redis-url", redis_url]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout, env=environment(variant, workdir))
    found = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise RuntimeError(f"{variant}: valgrind run failed ({run.returncode}): {run.stderr[-1500:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--calls", type=int, default=400, help="calls measured per variant (beyond the base run's)")
    parser.add_argument("--warm", type=int, default=200, help="calls before counting starts")
    parser.add_argument("--stream", action="store_true", help="each call a 20-chunk stream (the bench's)")
    parser.add_argument("--steps", action="store_true",
                        help="with --child: also print trio's task steps per call, by task (the CPU figure "
                             "then includes the instrument's own cost)")
    parser.add_argument("--profile", type=Path,
                        help="with --child: cProfile the counted calls (not the warm-up) into this pstats file")
    parser.add_argument("--keep", type=Path,
                        help="keep each run's cachegrind output here (<variant>-<calls>.cachegrind): cg_diff the "
                             "long and short runs, then cg_annotate, for the instructions by C function")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per valgrind run")
    parser.add_argument("--out", type=Path, help="write the markdown table here too")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--nginx-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    if (args.steps or args.profile) and not args.child:
        parser.error("--steps and --profile look at one child run: give --child VARIANT too")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    if args.child and args.nginx_port is None:   # a child run by hand: its own nginx (and Redis), once
        variants = [args.child]
    elif args.child:
        child(args.child, args.calls, args.warm, args.nginx_port, args.redis_url, args.workdir, args.stream,
              args.steps, args.profile)
        return

    from targets import Redis, free_port, write_nginx_conf

    workdir = Path(tempfile.mkdtemp(prefix="switchyard-instructions-"))
    os.chmod(workdir, 0o755)   # nginx workers may run as another user
    (workdir / "nginx").mkdir()
    nginx_port = free_port()
    conf = write_nginx_conf(workdir / "nginx", nginx_port)
    nginx = subprocess.Popen(["nginx", "-p", str(workdir / "nginx"), "-e", str(workdir / "nginx" / "error.log"),
                              "-c", str(conf)], start_new_session=True)
    redis = Redis(workdir) if any("limits" in PARTS[v] for v in variants) else None
    try:
        if redis is not None:
            redis.start()
        time.sleep(0.3)   # nginx listening
        for variant in variants:
            if variant != "floor":
                write_config(variant, workdir, nginx_port, redis.url if redis is not None else None)
        if args.child:
            child(args.child, args.calls, args.warm, nginx_port, redis.url if redis else None, workdir, args.stream,
                  args.steps, args.profile)
            return
        rows = {}
        for variant in variants:
            url = redis.url if redis is not None and "limits" in PARTS[variant] else None
            short = instructions(args, variant, BASE_CALLS, nginx_port, url, workdir)
            long = instructions(args, variant, BASE_CALLS + args.calls, nginx_port, url, workdir)
            rows[variant] = (long - short) / args.calls
            print(f"{variant}: {rows[variant] / 1e3:,.0f}k instructions per {'stream' if args.stream else 'call'}",
                  flush=True)
    finally:
        nginx.terminate()
        nginx.wait(10)
        if redis is not None:
            redis.stop()
    text = report(rows, args)
    print(text)
    if args.out:
        args.out.write_text(text)


def report(rows: dict[str, float], args) -> str:
    kind = "20-chunk stream" if args.stream else "call"
    lines = [f"Instructions per {kind}, in-process under cachegrind ({args.calls} calls less {BASE_CALLS}, "
             f"{CONCURRENCY} at a time, after {args.warm}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}:",
             "", f"| variant | k instructions per {kind} | vs floor | vs plain |", "|---|---|---|---|"]
    for variant, n in rows.items():
        floor = f"{n / rows['floor']:.2f}" if rows.get("floor") else ""
        plain = f"{n / rows['plain']:.2f}" if rows.get("plain") else ""
        lines.append(f"| {variant} | {n / 1e3:,.0f} | {floor} | {plain} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
