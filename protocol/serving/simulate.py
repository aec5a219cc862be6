"""``switchyard simulate``: routing strategies compared on a fleet of simulated engines, on virtual time.

Each workload (``protocol/simulated/workloads.py``, drawn from ``--seed``)
runs once per strategy (``simulate_strategies.py``) through a fresh gateway
in process (``simulate_run.py``), against the built-in fleet of ``--backends``
simulated vLLM engines or the simulated backends of ``--config``. One row per
strategy: time to first token (p50, p99), the engines' prefix-cache hit ratio
(in tokens), throughput (answered calls per second of virtual time) and load
spread (the coefficient of variation of the calls each backend took: 0 is
even). Deterministic: the same options give the same table.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, TextIO

import yaml

from switchyard.config.load import ConfigError, load_text
from switchyard.protocol.serving.simulate_run import Measured, measure
from switchyard.protocol.serving.simulate_strategies import STRATEGIES, Config, unavailable
from switchyard.protocol.simulated.workloads import WORKLOADS, generate

MODEL = "sim-llm"
REQUESTS = 200
BACKENDS = 4


def add_parser(sub: Any) -> None:
    """``simulate`` under the CLI's subcommands."""
    p = sub.add_parser("simulate", help="compare routing strategies on simulated engines, on virtual time")
    p.add_argument("--workload", default="all",
                   help=f"comma-separated: {', '.join(WORKLOADS)}, or all (default: all)")
    p.add_argument("--strategy", default="all",
                   help=f"comma-separated: {', '.join(STRATEGIES)}, or all (default: all)")
    p.add_argument("--requests", type=int, default=REQUESTS, help=f"calls per workload (default: {REQUESTS})")
    p.add_argument("--backends", type=int, help=f"engines in the built-in fleet (default: {BACKENDS})")
    p.add_argument("--config", help="a config whose simulated backends with simulation.engine_kv serve --model "
                                    "(default: the built-in fleet)")
    p.add_argument("--model", help=f"the model the workload asks for (default: {MODEL}, or the first model "
                                   "of the config's first backend)")
    p.add_argument("--seed", type=int, default=1, help="the workloads' seed (default: 1)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")


def fleet(backends: int) -> Config:
    """The built-in fleet: ``backends`` simulated vLLM engines, one model, a 64k-token KV cache each."""
    engine = {"blocks": 4096, "block_size": 16, "prefill_tokens_per_second": 10_000, "decode_tokens_per_second": 50}
    return {
        "usage": {"ledger": "memory"},
        "health_checks": {"interval": "30s"},
        "backends": [{"name": f"engine-{i}", "type": "simulated", "models": [MODEL],
                      "simulation": {"latency": 0, "chunks": 24, "max_concurrency": 32, "engine": {},
                                     "engine_kv": dict(engine)}}
                     for i in range(backends)],
    }


def simulate_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run and print; 2 for options that break their rule, 1 when the config fails to load."""
    out = out or sys.stdout
    try:
        workloads = _chosen(args.workload, list(WORKLOADS), "--workload")
        strategies = _chosen(args.strategy, list(STRATEGIES), "--strategy")
        if args.requests < 1:
            raise ValueError("--requests must be at least 1")
        if args.config and args.backends is not None:
            raise ValueError("--backends sizes the built-in fleet: a --config brings its own backends")
        if args.backends is not None and not 1 <= args.backends <= 256:
            raise ValueError("--backends must be from 1 to 256")
        base, base_dir = _base(args)
        engines = sum(1 for b in base.get("backends") or ()
                      if isinstance(b, dict) and (b.get("simulation") or {}).get("engine_kv") is not None)
        if not engines:
            raise ValueError(f"{args.config}: no simulated backend with simulation.engine_kv to run the workloads on")
    except (ValueError, OSError, yaml.YAMLError) as exc:
        print(f"switchyard simulate: error: {exc}", file=sys.stderr)
        return 2
    model = args.model or _first_model(base)
    report: dict[str, Any] = {"seed": args.seed, "requests": args.requests, "backends": engines, "model": model,
                              "workloads": {}, "skipped": {}}
    for name in workloads:
        workload = generate(name, args.seed, args.requests, engines)
        rows = report["workloads"][name] = []
        for strategy_name in strategies:
            strategy = STRATEGIES[strategy_name]
            why = unavailable(strategy)
            if why is None:
                config = json.loads(json.dumps(base))   # a deep copy each strategy edits
                strategy.edit(config)
                try:
                    snapshot = load_text(yaml.safe_dump(config), base_dir=base_dir).snapshot
                except ConfigError as exc:
                    print(f"switchyard simulate: {strategy_name}: the config does not load: "
                          f"{'; '.join(exc.errors) or exc}", file=sys.stderr)
                    return 1
                measured = measure(snapshot, workload, model, strategy.wire)
                why = measured.skipped
            if why is not None:
                report["skipped"][strategy_name] = why
                continue
            rows.append(summary(strategy_name, measured))
    for name, why in report["skipped"].items():
        print(f"switchyard simulate: {name} skipped: {why}", file=sys.stderr)
    if args.format == "json":
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        out.write(table(report))
    return 0


def _chosen(text: str, known: list[str], option: str) -> list[str]:
    if text == "all":
        return known
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"{option}: unknown {', '.join(unknown) or 'empty list'} (known: {', '.join(known)}, all)")
    return names


def _base(args: argparse.Namespace) -> tuple[Config, Path | None]:
    if not args.config:
        return fleet(args.backends or BACKENDS), None
    path = Path(args.config)
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise ValueError(f"{path}: not a mapping")
    return config, path.resolve().parent


def _first_model(config: Config) -> str:
    for backend in config.get("backends") or ():
        for model in backend.get("models") or ():
            return str(model)
    return MODEL


def summary(strategy: str, m: Measured) -> dict[str, Any]:
    """One row: milliseconds, ratios and rates rounded so the same run prints the same digits."""
    counts = list(m.per_backend.values())
    mean = statistics.fmean(counts) if counts else 0.0
    span = m.last_ended - m.first_sent
    return {
        "strategy": strategy,
        "ttft_p50_ms": round(percentile(m.ttft, 0.50) * 1000, 1),
        "ttft_p99_ms": round(percentile(m.ttft, 0.99) * 1000, 1),
        "hit_ratio": round(m.hit / m.queried, 3) if m.queried else 0.0,
        "requests_per_second": round(len(m.ttft) / span, 2) if span > 0 else 0.0,
        "load_cv": round(statistics.pstdev(counts) / mean, 3) if mean else 0.0,
        "answered": len(m.ttft),
        "failed": m.failed,
        "per_backend": m.per_backend,
    }


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


COLUMNS = (("strategy", "strategy"), ("ttft_p50_ms", "TTFT p50 ms"), ("ttft_p99_ms", "TTFT p99 ms"),
           ("hit_ratio", "hit ratio"), ("requests_per_second", "req/s"), ("load_cv", "load CV"),
           ("failed", "failed"))


def table(report: dict[str, Any]) -> str:
    lines = []
    for name, rows in report["workloads"].items():
        lines.append(f"workload {name}: {report['requests']} requests, {report['backends']} backends, "
                     f"seed {report['seed']}")
        cells = [[label for _, label in COLUMNS]] + [[str(row[key]) for key, _ in COLUMNS] for row in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
        for r in cells:
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        lines.append("")
    return "\n".join(lines)
