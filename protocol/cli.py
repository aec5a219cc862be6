"""``switchyard serve | config validate``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any

from config.load import ConfigError, load_demo, load_file
from config.rules import Invalid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="switchyard", description="An LLM gateway on Trio.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gateway with hypercorn (trio worker)")
    serve.add_argument("--config", help="config file (default: the embedded demo with two simulated backends)")
    serve.add_argument("--bind", help="HOST:PORT to listen on (default: server.bind_address)")
    serve.add_argument("--workers", type=int, help="worker processes (default: server.workers)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    config = sub.add_parser("config", help="configuration tools")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    validate = config_sub.add_parser("validate", help="check a config file; non-zero exit on errors")
    validate.add_argument("file")

    args = parser.parse_args(argv)
    if args.command == "config":
        return validate_command(args.file)
    return serve_command(args)


def validate_command(path: str) -> int:
    try:
        loaded = load_file(path)
    except ConfigError as exc:
        for warning in exc.warnings:
            print(f"warning: {warning}")
        for error in exc.errors:
            print(f"error: {error}")
        print(f"{path}: {len(exc.errors)} error(s), {len(exc.warnings)} warning(s)")
        return 1
    for warning in loaded.warnings:
        print(f"warning: {warning}")
    snap = loaded.snapshot
    print(f"{path}: OK ({len(snap.backends)} backend(s), selection_strategy {snap.selection_strategy.value}, "
          f"revision {snap.revision}, {len(loaded.warnings)} warning(s))")
    return 0


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per upstream request is noise


def serve_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        loaded = load_file(args.config) if args.config else load_demo()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    for warning in loaded.warnings:
        logging.getLogger("switchyard.config").warning("%s", warning)
    server = loaded.snapshot.server
    try:
        bind = _bind(args.bind) if args.bind else server.bind_address
    except Invalid as exc:
        print(f"--bind: {exc}", file=sys.stderr)
        return 2
    workers = args.workers if args.workers is not None else server.workers
    if workers < 1:
        print("--workers: must be at least 1", file=sys.stderr)
        return 2

    from hypercorn.config import Config

    hc = Config()
    hc.bind = [bind]
    hc.worker_class = "trio"
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")  # through our handler, not a second one
    hc.loglevel = args.log_level.upper()
    hc.keep_alive_timeout = 75  # outlive typical load-balancer idle timeouts (60 s)
    hc.graceful_timeout = 10
    if workers == 1:
        import trio

        trio.run(_serve_one, args.config, hc)
        return 0
    # Several workers: hypercorn spawns processes that each import the app
    # through a factory; the config path travels in the environment.
    from hypercorn.run import run

    os.environ["SWITCHYARD_CONFIG"] = os.path.abspath(args.config) if args.config else ""
    os.environ["SWITCHYARD_LOG_LEVEL"] = args.log_level
    hc.workers = workers
    hc.application_path = "protocol.app:app_from_env()"
    return run(hc)


async def _serve_one(config_path: str | None, hc: Any) -> None:
    """One in-process worker that drains on SIGTERM/SIGINT like hypercorn's own workers.

    Without a shutdown trigger the signal would kill the process mid-stream;
    with it, hypercorn stops accepting, lets in-flight calls finish within
    ``graceful_timeout``, then runs the lifespan shutdown.
    """
    import trio
    from hypercorn.trio import serve

    from protocol.app import create_app

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async def stop() -> None:
            async for signum in signals:
                logging.getLogger("switchyard").info("signal %s: draining", signal.Signals(signum).name)
                return

        await serve(create_app(config_path), hc, shutdown_trigger=stop)


def _bind(text: str) -> str:
    from config.load import bind_address

    return bind_address(text)


if __name__ == "__main__":
    sys.exit(main())
