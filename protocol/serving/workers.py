"""Running the app on hypercorn: one worker in-process, or several processes.

Every worker handles its own signals the same way:

- SIGTERM / SIGINT: drain. ``/ready`` turns 503 at once so the load balancer
  stops sending; the listening socket closes (new connections are refused);
  calls in flight get ``server.shutdown_drain_timeout`` to finish and are then
  ended with a clean ``server_shutting_down`` error; hypercorn's own hard
  limit comes two seconds later, so it never cuts a call first.
- SIGHUP: reload the config file.

With several workers the parent opens the sockets once, starts the workers
as processes that share them, closes its own copy, and forwards these
signals to every worker. A worker told to stop while it is still starting
closes its copy at once and exits without serving: a listening socket is
refused only once every copy of it is closed.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
import sys
from typing import Any

import trio

from switchyard.config.schema import ServerConfig
from switchyard.protocol.serving import demo_console
from switchyard.protocol.serving.demo_console import ConsoleLink

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
                      stop_requested: Any = None, link: ConsoleLink | None = None, announce: bool = False) -> int:
    """Serve until a stop; the process's exit status: 0, or 1 when the app could not start. ``link``: the
    demo's console link of this run (its token is the admin token), printed once serving if ``announce``."""
    from hypercorn.trio.run import worker_serve
    from hypercorn.utils import LifespanFailureError, wrap_app

    from switchyard.protocol.serving import client_eof
    from switchyard.protocol.serving.app import create_app

    client_eof.install()   # connections the client ended are closed at once (hypercorn's own wait 75 s)

    app = create_app(config_path, watch=watch, run_token=link.token if link is not None else None)
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
            # Told to stop while starting (_worker_process closed the sockets then):
            # nothing was served, so there is nothing to drain.
            return 0
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(on_signals)

                async def serve(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
                    # The App takes plain dicts where hypercorn's types name TypedDicts (which no dict is).
                    wrapped = wrap_app(app, hc.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]  # plain-dict ASGI
                    await worker_serve(wrapped, hc, sockets=sockets,
                                       shutdown_trigger=shutdown.wait, task_status=task_status)
                    nursery.cancel_scope.cancel()

                await nursery.start(serve)   # listening (hypercorn goes on to here even when the app failed)
                if link is not None and announce and app.runtime is not None:
                    demo_console.announce(link)   # last of the start lines, where a person looks
        # The app could not start (a ledger that cannot be reached, say): it has logged why, and
        # hypercorn's own exception (in a group per nursery) would only bury that under tracebacks.
        except LifespanFailureError:
            return 1
        except BaseExceptionGroup as group:
            failed, rest = group.split(LifespanFailureError)
            if failed is None or rest is not None:
                raise
            return 1
    return 0


def serve_one(config_path: str | None, hc: Any, watch: bool = True, link: ConsoleLink | None = None) -> int:
    return trio.run(worker_main, config_path, hc, watch, None, None, link, True)


def _worker_process(config_path: str | None, hc: Any, watch: bool, sockets: Any, log_level: str,
                    log_format: str, stop_requested: Any, index: int = 0, workers: int = 1,
                    link: ConsoleLink | None = None) -> None:
    listening = [*sockets.secure_sockets, *sockets.insecure_sockets]

    def stop_while_starting(_signum: int, _frame: Any) -> None:
        # Until worker_main hears signals itself (after the app's imports, a second or so), a
        # stop closes this worker's copy of the sockets at once: while any copy is open the
        # kernel queues connections on them that nobody would accept. The parent has set
        # stop_requested already, so worker_main then exits without serving.
        for sock in listening:
            sock.close()

    signal.signal(signal.SIGTERM, stop_while_starting)
    signal.signal(signal.SIGINT, stop_while_starting)
    if stop_requested.is_set():   # the signal came while this process was being spawned
        stop_while_starting(signal.SIGTERM, None)
        return
    from switchyard.protocol.http.logs import install

    install(log_level, log_format)
    try:
        for sock in listening:
            sock.listen(hc.backlog)
    except OSError:
        if stop_requested.is_set():
            return   # closed by a stop between the check above and here
        raise
    # Which of the instance's workers this is: each keeps its own ledger spill file. Imported only
    # now, after the stop handlers: the app's modules take a second to import.
    from switchyard.protocol.serving.wiring import WORKER_ENV, WORKERS_ENV

    os.environ[WORKER_ENV] = str(index)
    os.environ[WORKERS_ENV] = str(workers)
    # Every worker takes the run's one admin token; the first prints the link.
    code = trio.run(worker_main, config_path, hc, watch, sockets, stop_requested, link, index == 0)
    if code:
        sys.exit(code)   # the app could not start, and said why


def serve_many(config_path: str | None, hc: Any, workers: int, watch: bool, log_level: str,
               log_format: str, link: ConsoleLink | None = None) -> int:
    """Start ``workers`` processes sharing one set of sockets; forward signals; wait. ``link`` reaches each
    as an argument (pickled through the pipe ``spawn`` opens, never the environment or a command line)."""
    sockets = hc.create_sockets()
    ctx = multiprocessing.get_context("spawn")
    stop_requested = ctx.Event()  # for workers still starting when a stop signal comes
    procs = [ctx.Process(target=_worker_process,
                         args=(config_path, hc, watch, sockets, log_level, log_format, stop_requested, i,
                               workers, link),
                         daemon=False) for i in range(workers)]

    def forward(signum: int, _frame: Any) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            stop_requested.set()
            signum = signal.SIGTERM   # a worker still being spawned ignores SIGINT (below)
        for p in procs:
            if p.is_alive() and p.pid is not None:
                try:
                    os.kill(p.pid, signum)
                except ProcessLookupError:
                    pass

    # Workers inherit "ignore" for SIGINT and SIGHUP, so a signal to the whole process group
    # reaches each of them once, by us. SIGTERM has a handler here instead, which a new
    # process does not inherit: a worker still being spawned (before it can handle signals
    # itself, see _worker_process) dies of it at once, and its copy of the sockets with it.
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGHUP)}
    previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, forward)
    for p in procs:
        p.start()

    # Every worker holds its own copy of the sockets now. The parent's must go: a listening
    # socket stays open, and the kernel keeps queueing connections on it, until the last
    # copy is closed, so a copy kept here would let a drain's new connections hang unanswered
    # (then be reset) instead of being refused at once when the workers close theirs.
    for sock in [*sockets.secure_sockets, *sockets.insecure_sockets]:
        sock.close()
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGHUP, forward)
    try:
        for p in procs:
            p.join()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    # A worker that died of the SIGTERM a stop sent it (while being spawned) stopped as asked.
    codes = [0 if p.exitcode == -signal.SIGTERM and stop_requested.is_set() else abs(p.exitcode or 0)
             for p in procs]
    return max(codes)
