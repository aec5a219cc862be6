"""Running the app on hypercorn: one worker in-process, or several processes.

Every worker handles its own signals the same way:

- SIGTERM / SIGINT: drain. ``/ready`` turns 503 at once so the load balancer
  stops sending; the listening socket closes (new connections are refused);
  calls in flight get ``server.shutdown_drain_timeout`` to finish and are then
  ended with a clean ``server_shutting_down`` error; hypercorn's own hard
  limit comes two seconds later, so it never cuts a call first.
- SIGHUP: reload the config file.

With several workers the parent opens the sockets once, starts the workers
as processes that share them, and forwards these signals to every worker.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
from typing import Any

import trio

from config.schema import ServerConfig

log = logging.getLogger("switchyard")

HARD_LIMIT_MARGIN = 2.0  # seconds hypercorn waits beyond our own drain window
GC_YOUNG_THRESHOLD = 50_000  # allocations between collections of the youngest generation (below)


def hypercorn_config(server: ServerConfig, bind: str, log_level: str = "info") -> Any:
    """hypercorn's settings for the ``server`` section, listening on ``bind``."""
    from hypercorn.config import Config

    hc = Config()
    hc.bind = [bind]
    hc.worker_class = "trio"
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")  # through our handler, not a second one
    hc.loglevel = log_level.upper()
    # Outlives typical load-balancer idle timeouts (60 s). hypercorn's keep-alive timer also
    # runs from the moment a connection opens (or its last answer ends) until a request's
    # headers are complete, so it bounds how long a client may take to send them.
    hc.keep_alive_timeout = server.keep_alive_timeout
    hc.graceful_timeout = server.shutdown_drain_timeout + HARD_LIMIT_MARGIN  # ours ends calls first
    return hc


async def worker_main(config_path: str | None, hc: Any, watch: bool = True, sockets: Any = None,
                      stop_requested: Any = None) -> None:
    from hypercorn.trio.run import worker_serve
    from hypercorn.utils import wrap_app

    from protocol.app import create_app

    app = create_app(config_path, watch=watch)
    # Everything imported so far lives as long as the process: the cyclic
    # garbage collector need not walk it again on every full collection.
    gc.collect()
    gc.freeze()
    # Each call allocates a few hundred short-lived objects and leaves no reference
    # cycles behind (about 0.01 unreachable objects per call), so the cyclic collector
    # finds next to nothing; what it costs is walking the objects of the calls in
    # flight again and again. Collecting the youngest generation every 700 allocations
    # spent about a third of a busy worker's CPU on 1,000 open streams; every 10,000,
    # about 10 % with 500 streams in flight; every 50,000, about a third of that, with
    # the same memory. Garbage that does form cycles (a failed call's exception and
    # traceback) waits for at most 50,000 allocations.
    gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)
    shutdown = trio.Event()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async def on_signals() -> None:
            async for signum in signals:
                name = signal.Signals(signum).name
                if signum == signal.SIGHUP:
                    if app.runtime is not None:
                        result = app.runtime.reload_from_file("signal")
                        log.info("SIGHUP: config reload %s", result["result"])
                    continue
                if shutdown.is_set():
                    continue  # already draining (a terminal's Ctrl-C reaches every worker twice)
                window = app.begin_drain()
                log.info("%s: draining for up to %gs", name, window)
                hc.graceful_timeout = window + HARD_LIMIT_MARGIN
                shutdown.set()

        if stop_requested is not None and stop_requested.is_set():
            # The parent was told to stop before this worker could hear signals
            # (they are ignored until the receiver above exists): stop at once,
            # never saying ready or taking a call.
            app.begin_drain()
            shutdown.set()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(on_signals)
            await worker_serve(wrap_app(app, hc.wsgi_max_body_size, "asgi"), hc, sockets=sockets,
                               shutdown_trigger=shutdown.wait)
            nursery.cancel_scope.cancel()


def serve_one(config_path: str | None, hc: Any, watch: bool = True) -> int:
    trio.run(worker_main, config_path, hc, watch)
    return 0


def _worker_process(config_path: str | None, hc: Any, watch: bool, sockets: Any, log_level: str,
                    log_format: str, stop_requested: Any) -> None:
    from protocol.cli import configure_logging

    configure_logging(log_level, log_format)
    for sock in [*sockets.secure_sockets, *sockets.insecure_sockets]:
        sock.listen(hc.backlog)
    trio.run(worker_main, config_path, hc, watch, sockets, stop_requested)


def serve_many(config_path: str | None, hc: Any, workers: int, watch: bool, log_level: str,
               log_format: str) -> int:
    """Start ``workers`` processes sharing one set of sockets; forward signals; wait."""
    sockets = hc.create_sockets()
    ctx = multiprocessing.get_context("spawn")
    stop_requested = ctx.Event()  # for workers still starting when a stop signal comes
    procs = [ctx.Process(target=_worker_process,
                         args=(config_path, hc, watch, sockets, log_level, log_format, stop_requested),
                         daemon=False) for _ in range(workers)]
    # Workers inherit "ignore" for the signals they handle themselves, so a
    # signal to the whole process group reaches each of them once, by us.
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    for p in procs:
        p.start()

    def forward(signum: int, _frame: Any) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            stop_requested.set()
        for p in procs:
            if p.is_alive() and p.pid is not None:
                try:
                    os.kill(p.pid, signum)
                except ProcessLookupError:
                    pass

    # Every worker holds its own copy of the sockets now. The parent's must go: a listening
    # socket stays open, and the kernel keeps queueing connections on it, until the last
    # copy is closed, so a copy kept here would let a drain's new connections hang unanswered
    # (then be reset) instead of being refused at once when the workers close theirs.
    for sock in [*sockets.secure_sockets, *sockets.insecure_sockets]:
        sock.close()
    for s in previous:
        signal.signal(s, forward)
    try:
        for p in procs:
            p.join()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return max((p.exitcode or 0) for p in procs)
