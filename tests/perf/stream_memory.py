"""Where the memory of an open stream goes: a server held at N paced streams, under tracemalloc.

The benchmark's hold phase gives one figure, RSS per open stream. This tool
says what holds it. It runs the target server (Switchyard's plain config, or
the floor: the pooled pass-through) against the paced upstream, and signals
it three times (SIGUSR1); each time the server's handler writes a tracemalloc
snapshot and its gc object counts:

  0  every client connection open and idle (tracemalloc starts here, so
     start-up runs at full speed and the later snapshots hold only what
     came after);
  1  every stream has its first chunk, between two chunk bursts;
  2  after the next chunk burst, between bursts again.

It reports, per open stream:
  - traced: Python heap held at 1 (what an open stream costs at rest);
  - burst: the tracemalloc peak from 1 to 2 above what 1 held once collected (the
    paced upstream sends every stream's chunk at one instant, so each
    stream's per-chunk objects are alive together at that peak);
  - gc objects and coroutines, by type;
  - the sites: what 0 to 1 added, grouped by the innermost frame of the
    target's own code (Switchyard's modules, or passthrough.py), with the
    library line under it that allocated most.

The handler reads the traced figures before it allocates anything of its own
(the object list it counts is several MB, and would otherwise be that peak).
RSS is printed too, but tracemalloc's bookkeeping inflates it; the
benchmark's hold phase is the figure for RSS.

    python tests/perf/stream_memory.py --target switchyard --streams 300
    python tests/perf/stream_memory.py --target floor --streams 300 --top 20

Talks only to 127.0.0.1; both servers are stopped in a ``finally``, and every
wait is bounded.
"""
from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import pickle
import runpy
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))


# --------------------------------------------------------------------------- in the server: the snapshots

def serve(out: Path, frames: int, target: str, argv: list[str]) -> None:
    """Run the server (``switchyard`` CLI arguments, or a script and its arguments) with the SIGUSR1 handler."""
    taken = [0]

    def on_signal(_signum, _frame) -> None:
        traced = tracemalloc.get_traced_memory() if tracemalloc.is_tracing() else (0, 0)   # before any of ours
        n = taken[0]
        taken[0] += 1
        gc.collect()
        objects = gc.get_objects()
        types = collections.Counter(type(o).__qualname__ for o in objects)
        coroutines = collections.Counter(
            f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_qualname}" for code in
            (getattr(o, "cr_code", None) for o in objects) if code is not None)
        del objects
        if not tracemalloc.is_tracing():
            tracemalloc.start(frames)
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        (out / f"snap-{n}.pickle").write_bytes(pickle.dumps(snapshot))
        del snapshot
        rss = next(line for line in open("/proc/self/status") if line.startswith("VmRSS")).split()[1]
        tracemalloc.reset_peak()
        settled = tracemalloc.get_traced_memory()[0]   # after the collection: where the next peak starts
        (out / f"counts-{n}.json").write_text(json.dumps(
            {"traced": traced, "settled": settled, "rss_kb": int(rss), "types": types, "coroutines": coroutines}))
        (out / f"done-{n}").touch()

    signal.signal(signal.SIGUSR1, on_signal)
    if target == "switchyard":
        from switchyard.protocol.serving.cli import main as cli_main
        sys.exit(cli_main(argv))
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")


# --------------------------------------------------------------------------- the driver

async def _quiet(pid: int, still: float = 0.3, limit: float = 30.0) -> None:
    """Until the server has used no CPU for ``still`` seconds: every task parked, between bursts."""
    import trio
    from targets import tree_cpu_seconds

    with trio.move_on_after(limit):
        last, since = tree_cpu_seconds(pid), trio.current_time()
        while True:
            await trio.sleep(0.02)
            now = tree_cpu_seconds(pid)
            if now != last:
                last, since = now, trio.current_time()
            elif trio.current_time() - since >= still:
                return
    print("warning: the server was never quiet for long; the snapshot may catch a burst", flush=True)


async def _snapshot(pid: int, out: Path, n: int, timeout: float = 300.0) -> None:
    import trio

    os.kill(pid, signal.SIGUSR1)
    with trio.fail_after(timeout):
        while not (out / f"done-{n}").exists():
            await trio.sleep(0.05)


async def drive(server, streams: int, interval: float, out: Path) -> None:
    import trio
    from loadgen import _clients, _open_connections, _stream
    from targets import MESSAGES

    body = json.dumps({"model": server.stream_model, "messages": MESSAGES, "stream": True}).encode()
    pid = server.proc.pid
    clients = _clients(streams)
    firsts = 0
    all_open = trio.Event()

    def first_chunk() -> None:
        nonlocal firsts
        firsts += 1
        if firsts == streams:
            all_open.set()

    try:
        with trio.fail_after(120 + 30 * interval):
            await _open_connections(clients, server)
            await _quiet(pid)
            await _snapshot(pid, out, 0)
            async with trio.open_nursery() as nursery:
                for client in clients:
                    nursery.start_soon(_stream, client, server, body, first_chunk)
                await all_open.wait()
                await trio.sleep(interval / 2)   # past the first burst
                await _quiet(pid)
                await _snapshot(pid, out, 1)
                await trio.sleep(interval)       # one more burst
                await _quiet(pid)
                await _snapshot(pid, out, 2)
                nursery.cancel_scope.cancel()
    finally:
        for client in clients:
            await client.aclose()


def _ours(filename: str) -> bool:
    if "/site-packages/switchyard/" in filename or filename.endswith("passthrough.py"):
        return True
    return filename.startswith(str(REPO)) and "/.venv/" not in filename and "/tests/" not in filename


def _short(filename: str) -> str:
    for cut in ("/site-packages/", f"{REPO}/"):
        if cut in filename:
            return filename.split(cut, 1)[1]
    return filename.rsplit("/", 1)[-1]


def report(out: Path, streams: int, top: int) -> str:
    counts = [json.loads((out / f"counts-{i}.json").read_text()) for i in range(3)]
    per = 1024 * streams
    held = counts[1]["traced"][0] - counts[0]["traced"][0]
    burst = counts[2]["traced"][1] - counts[1]["settled"]
    lines = [f"streams held: {streams}",
             f"traced per open stream: {held / per:.1f} KB",
             f"burst (peak over one chunk burst above that): {burst / per:.1f} KB",
             f"RSS per open stream (tracemalloc's own bookkeeping included): "
             f"{(counts[1]['rss_kb'] - counts[0]['rss_kb']) / streams:.1f} KB"]
    for field, label in (("types", "gc objects"), ("coroutines", "coroutines")):
        delta = collections.Counter(counts[1][field])
        delta.subtract(counts[0][field])
        lines.append(f"{label} per open stream: {sum(delta.values()) / streams:.1f}")
        for name, n in delta.most_common(12):
            if n / streams >= 0.5:
                lines.append(f"  {n / streams:6.2f}  {name}")
    before, after = (pickle.loads((out / f"snap-{i}.pickle").read_bytes()) for i in (0, 1))
    sites: dict[str, list] = collections.defaultdict(lambda: [0, 0, collections.Counter()])
    for stat in after.compare_to(before, "traceback"):
        frames = list(stat.traceback)   # oldest first
        mine = [f for f in frames if _ours(f.filename)]
        key = f"{_short(mine[-1].filename)}:{mine[-1].lineno}" if mine else "(no frame of the target's own)"
        site = sites[key]
        site[0] += stat.size_diff
        site[1] += stat.count_diff
        site[2][f"{_short(frames[-1].filename)}:{frames[-1].lineno}"] += stat.size_diff
    lines.append(f"sites (0 to 1), by the innermost frame of the target's own code; {top} largest:")
    for key, (size, count, under) in sorted(sites.items(), key=lambda kv: -kv[1][0])[:top]:
        lib, lib_size = under.most_common(1)[0]
        lines.append(f"  {size / per:6.2f} KB {count / streams:6.1f} blocks  {key}   (most under it: {lib} "
                     f"{lib_size / per:.2f} KB)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=["switchyard", "floor"], default="switchyard")
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--interval", type=float, default=4.0,
                        help="seconds between a stream's chunks: long enough for a traced burst to end")
    parser.add_argument("--frames", type=int, default=30, help="tracemalloc frames per allocation")
    parser.add_argument("--top", type=int, default=25, help="sites listed")
    parser.add_argument("--out", type=Path, help="keep the snapshots and write the report here")
    parser.add_argument("--serve", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        out, frames, target, *argv = args.serve
        serve(Path(out), int(frames), target, argv)
        return

    import trio
    from loadgen import raise_fd_limit
    from targets import Server, free_port, write_switchyard_config

    out = args.out or Path(tempfile.mkdtemp(prefix="switchyard-stream-memory-"))
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("done-*"):
        stale.unlink()
    raise_fd_limit(4 * args.streams + 1024)
    python = sys.executable
    paced_port, port = free_port(), free_port()
    paced = Server("paced", [python, str(HERE / "paced_upstream.py"), "--bind", f"127.0.0.1:{paced_port}",
                             "--interval", str(args.interval)], paced_port, out,
                   chat_path="/v1/chat/completions", stream_path="/v1/chat/completions",
                   stream_model="bench-slow", ready_paths=("/health",))
    wrapped = [python, str(Path(__file__).resolve()), "--serve", str(out), str(args.frames)]
    if args.target == "switchyard":
        config = write_switchyard_config(out / "switchyard.yaml", port, paced_port, paced_port, features=False)
        argv = [*wrapped, "switchyard", "serve", "--config", str(config), "--bind", f"127.0.0.1:{port}",
                "--workers", "1"]
        env, ready = {**os.environ, "XDG_DATA_HOME": str(out / "data")}, ("/ready", "/health")
    else:
        argv = [*wrapped, "floor", str(HERE / "passthrough.py"), "--upstream", f"http://127.0.0.1:{paced_port}",
                "--bind", f"127.0.0.1:{port}", "--client", "pool", "--pool-size", str(args.streams + 100)]
        env, ready = None, ("/health",)
    server = Server(args.target, argv, port, out, chat_path="/v1/chat/completions",
                    stream_path="/v1/chat/completions", stream_model="bench-slow", ready_paths=ready, env=env)
    started = time.monotonic()
    try:
        paced.start()
        paced.wait_ready(30)
        server.start()
        server.wait_ready(120)
        trio.run(drive, server, args.streams, args.interval, out)
    finally:
        server.stop()
        paced.stop()
    text = report(out, args.streams, args.top)
    (out / "report.txt").write_text(text + "\n")
    print(text)
    print(f"({time.monotonic() - started:.0f} s; snapshots in {out})")


if __name__ == "__main__":
    main()
