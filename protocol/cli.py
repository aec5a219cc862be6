"""``switchyard serve | config validate``."""

from __future__ import annotations

import argparse
import logging
import sys

from config.load import ConfigError, load_demo, load_file
from config.rules import Invalid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="switchyard", description="An LLM gateway on Trio.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gateway with hypercorn (trio worker)")
    serve.add_argument("--config", help="config file (default: the embedded demo with two simulated backends)")
    serve.add_argument("--bind", help="HOST:PORT to listen on (default: server.bind_address)")
    serve.add_argument("--workers", type=int, help="worker processes (default: server.workers)")
    serve.add_argument("--no-watch", action="store_true",
                       help="do not reload the config file when it changes (SIGHUP still reloads)")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                       help="log level (default: logging.level, info)")
    serve.add_argument("--log-format", choices=["json", "text"],
                       help="one JSON object per line, or plain text (default: logging.format, json)")

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


def configure_logging(level: str, fmt: str = "json") -> None:
    """The root logger's one handler: ``fmt`` (json | text) at ``level``; hypercorn's error log goes through it."""
    from protocol.logs import install

    install(level, fmt)


def serve_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level or "info", args.log_format or "json")
    try:
        loaded = load_file(args.config) if args.config else load_demo()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    # The config's logging section, unless the command line said otherwise.
    log_level = args.log_level or loaded.snapshot.logging.level
    log_format = args.log_format or loaded.snapshot.logging.format
    configure_logging(log_level, log_format)
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
    hc.loglevel = log_level.upper()
    hc.keep_alive_timeout = 75  # outlive typical load-balancer idle timeouts (60 s)
    hc.graceful_timeout = loaded.snapshot.server.shutdown_drain_timeout + 2  # ours ends calls first

    from protocol import serving

    if workers == 1:
        return serving.serve_one(args.config, hc, watch=not args.no_watch)
    return serving.serve_many(args.config, hc, workers, watch=not args.no_watch, log_level=log_level,
                              log_format=log_format)


def _bind(text: str) -> str:
    from config.load import bind_address

    return bind_address(text)


if __name__ == "__main__":
    sys.exit(main())
