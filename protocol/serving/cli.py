"""``switchyard serve | config validate | metadata show | usage report | keys ... | orgs ... | admins ... |
simulate``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, NoReturn

from switchyard.config.contract import DOC as CONTRACT_DOC
from switchyard.config.load import ConfigError, load_demo, load_file
from switchyard.config.load_limits import workers_refusal
from switchyard.config.rules import Invalid
from switchyard.protocol.serving import admins_cli, keys_cli, orgs_cli, simulate, usage_report


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose exit status for a command line it cannot read is set per command: argparse's
    2 by default; ``keys``, whose 2 means a store that is away, refuses bad options with 1."""

    usage_exit = 2

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_exit, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="switchyard", description="An LLM gateway on Trio.")
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

    metadata = sub.add_parser("metadata", help="model metadata tools")
    metadata_sub = metadata.add_subparsers(dest="metadata_command", required=True)
    show = metadata_sub.add_parser("show", help="the resolved metadata of a model and the layer each field came from")
    show.add_argument("model")
    show.add_argument("--config", help="config file (default: the embedded demo config)")
    show.add_argument("--format", choices=["yaml", "json"], default="yaml", help="output format (default: yaml)")

    usage_report.add_parser(sub)
    keys_cli.add_parser(sub)
    admins_cli.add_parser(sub)
    orgs_cli.add_parser(sub)
    simulate.add_parser(sub)

    args, unread = parser.parse_known_args(argv)
    if unread:   # told by the (sub)command that was being read, with its exit status
        getattr(args, "usage_parser", parser).error(f"unrecognized arguments: {' '.join(unread)}")
    if args.command == "usage":
        return usage_report.report_command(args)
    if args.command == "keys":
        return keys_cli.keys_command(args)
    if args.command == "admins":
        return admins_cli.admins_command(args)
    if args.command == "orgs":
        return orgs_cli.orgs_command(args)
    if args.command == "simulate":
        return simulate.simulate_command(args)
    if args.command == "config":
        return validate_command(args.file)
    if args.command == "metadata":
        return metadata_show_command(args.model, args.config, args.format)
    return serve_command(args)


def validate_command(path: str) -> int:
    try:
        loaded = load_file(path)
    except ConfigError as exc:
        for warning in exc.warnings:
            print(f"warning: {warning}")
        for error in exc.errors:
            print(f"error: {error}")
        if exc.unsupported:
            print(f"not supported by Switchyard ({len(exc.unsupported)} key(s) of the configuration contract): "
                  f"{', '.join(exc.unsupported)} (see {CONTRACT_DOC})")
        print(f"{path}: {len(exc.errors)} error(s), {len(exc.warnings)} warning(s)")
        return 1
    for warning in loaded.warnings:
        print(f"warning: {warning}")
    snap = loaded.snapshot
    print(f"{path}: OK ({len(snap.backends)} backend(s), selection_strategy {snap.selection_strategy.value}, "
          f"revision {snap.revision}, {len(loaded.warnings)} warning(s))")
    return 0


def metadata_show_command(model: str, config_path: str | None, fmt: str = "yaml") -> int:
    """Print the merged metadata ``model`` resolves to, each field's layer and the resolution stage."""
    try:
        loaded = load_file(config_path) if config_path else load_demo()
    except ConfigError as exc:
        for error in exc.errors:
            print(f"error: {error}", file=sys.stderr)
        print(f"{exc.source}: {len(exc.errors)} error(s)", file=sys.stderr)
        return 1
    snap = loaded.snapshot
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    resolution = _resolve_model(model, snap)
    if resolution is None:
        known = len(set(snap.models.entries) | {m for b in snap.backends for m in b.model_metadata})
        print(f"metadata show: no model metadata matches {model!r} ({known} model id(s) known; "
              f"source {snap.source})", file=sys.stderr)
        return 1
    model_id = resolution["entry_id"]
    entry = snap.model_entry(model_id)
    doc: dict[str, Any] = {
        "model": model,
        "id": model_id,
        "resolution": {k: v for k, v in resolution.items() if k != "entry_id"},
        "aliases": list(entry.aliases) if entry is not None else [],
        "metadata": entry.metadata.to_dict() if entry is not None else None,
        "sources": _sources(entry) if entry is not None else {},
    }
    per_backend = {}
    for b in snap.backends:
        if model_id in b.model_metadata:
            merged = snap.model_entry(model_id, b.name)
            assert merged is not None
            per_backend[b.name] = {"metadata": merged.metadata.to_dict(),
                                   "sources": _sources(merged)}
    if per_backend:
        doc["backends"] = per_backend
    if fmt == "json":
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        import yaml

        print(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000), end="")
    return 0


def _sources(entry: Any) -> dict[str, str]:
    """Field -> the layer (and file) that set it, in the order the fields are printed."""
    def leaves(value: Any, path: str) -> list[str]:
        if isinstance(value, dict):
            return [leaf for k, v in value.items() for leaf in leaves(v, f"{path}.{k}" if path else k)]
        return [path]

    order = leaves(entry.metadata.to_dict(), "")
    return {f: str(entry.provenance[f]) for f in order if f in entry.provenance}


def _resolve_model(model: str, snap: Any) -> dict[str, Any] | None:
    """Which metadata id ``model`` means, and by which stage (``config/names.py``)."""
    backend_ids = [m for b in snap.backends for m in b.model_metadata if m not in snap.models.entries]
    try:
        from switchyard.config.names import Catalogue, Entry, resolve
    except ImportError:   # without the resolver: exact id, then exact alias
        if model in snap.models.entries or model in backend_ids:
            return {"entry_id": model, "stage": "EXACT_ID", "matched": model, "steps": [model]}
        if model in snap.models.aliases:
            return {"entry_id": snap.models.aliases[model], "stage": "EXACT_ALIAS", "matched": model,
                    "steps": [model]}
        return None
    # Backend model_configs first: names.py lets earlier entries win ties.
    entries = [Entry(m) for m in dict.fromkeys(backend_ids) if "*" not in m]
    entries += [Entry(e.id, e.aliases) for e in snap.models.entries.values()]
    found = resolve(model, Catalogue(tuple(entries)))
    if found is None:
        return None
    return {"entry_id": found.entry_id, "stage": found.stage.name, "matched": found.matched,
            "steps": list(found.steps)}


def configure_logging(level: str, fmt: str = "json") -> None:
    """The root logger's one handler: ``fmt`` (json | text) at ``level``; hypercorn's error log goes through it."""
    from switchyard.protocol.http.logs import install

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
    if bind != server.bind_address:   # the config's own address was checked when it loaded
        from switchyard.config import self_address
        from switchyard.config.rules import Problems

        found = Problems()
        self_address.check(loaded.snapshot.backends, bind, found, where="--bind")
        for warning in found.warnings:
            logging.getLogger("switchyard.config").warning("%s", warning)
    from switchyard.protocol.http.auth import open_beyond_loopback

    if open_beyond_loopback(bind, loaded.snapshot.api_keys):
        logging.getLogger("switchyard.config").warning(
            "no api_keys configured and listening on %s: anyone who can reach this address may call every "
            "model; configure api_keys or bind to 127.0.0.1", bind)
    workers = args.workers if args.workers is not None else server.workers
    if workers < 1:
        print("--workers: must be at least 1", file=sys.stderr)
        return 2
    refusal = workers_refusal(loaded.snapshot, workers)
    if refusal is not None:   # per-worker counters would multiply every limit by the worker count
        print(f"{loaded.snapshot.source}: {refusal}", file=sys.stderr)
        return 1

    from switchyard.protocol.serving import workers as serving
    from switchyard.protocol.serving.demo_console import console_link

    # The demo on loopback: an admin token of this run, the same in every worker, and a link that logs in.
    link = console_link(args.config, bind, loaded.snapshot.admin.token)
    hc = serving.hypercorn_config(server, bind, log_level)
    if workers == 1:
        return serving.serve_one(args.config, hc, watch=not args.no_watch, link=link)
    return serving.serve_many(args.config, hc, workers, watch=not args.no_watch, log_level=log_level,
                              log_format=log_format, link=link)


def _bind(text: str) -> str:
    from switchyard.config.values import bind_address

    return bind_address(text)


if __name__ == "__main__":
    sys.exit(main())
