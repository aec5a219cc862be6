"""The tables tests/perf/bench.py prints: medians over rounds, ratios, the performance targets, per-round detail.

Figures are medians over the interleaved rounds, and a ratio is of two
medians, so one disturbed round moves neither much.
"""
from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

CONNECTION_LEVELS = (32, 128)
RATIOS = (("switchyard", "litellm"), ("switchyard", "passthrough"), ("switchyard", "passthrough-pool"),
          ("switchyard-features", "switchyard"), ("switchyard-features", "litellm"), ("switchyard", "switchyard-base"),
          ("switchyard", "switchyard-memledger"), ("switchyard-limits", "switchyard-keyed"),
          ("switchyard-dbkey", "switchyard-keyed"),
          ("switchyard-guardrails", "switchyard"), ("switchyard-cache", "switchyard"), ("switchyard-all", "switchyard"),
          ("switchyard-all", "switchyard-all-base"), ("switchyard-limits-2w", "switchyard-limits"))
SHORT = {"switchyard": "sy", "switchyard-features": "sy+f", "litellm": "litellm", "passthrough": "pt",
         "passthrough-pool": "pt-pool", "switchyard-base": "base", "switchyard-memledger": "sy-memledger",
         "switchyard-keyed": "sy-keyed", "switchyard-dbkey": "sy-dbkey", "switchyard-limits": "sy-limits",
         "switchyard-guardrails": "sy-guard", "switchyard-cache": "sy-cache", "switchyard-all": "sy-all",
         "switchyard-all-base": "all-base", "switchyard-limits-2w": "sy-limits-2w"}


def table_rows(levels: list[int]) -> list[tuple[str, str, str]]:
    """(key, label, format) of the summary table."""
    rows = []
    for c in CONNECTION_LEVELS:
        rows += [(f"c{c}_rps", f"req/s @{c} conns", "{:.0f}"), (f"c{c}_p50_ms", f"p50 ms @{c}", "{:.1f}"),
                 (f"c{c}_p99_ms", f"p99 ms @{c}", "{:.1f}"), (f"c{c}_cpu_ms_per_req", f"CPU ms/req @{c}", "{:.2f}")]
    for n in levels:
        rows += [(f"s{n}_ttfc_p50_ms", f"{n} streams: TTFC p50 ms", "{:.0f}"),
                 (f"s{n}_ttfc_p99_ms", f"{n} streams: TTFC p99 ms", "{:.0f}"),
                 (f"s{n}_total_p50_ms", f"{n} streams: total p50 ms", "{:.0f}"),
                 (f"s{n}_total_p99_ms", f"{n} streams: total p99 ms", "{:.0f}"),
                 (f"s{n}_streams_per_s", f"{n} streams: streams/s", "{:.0f}"),
                 (f"s{n}_cpu_ms_per_stream", f"{n} streams: CPU ms/stream", "{:.2f}")]
    return rows + [("peak_rss_mb", "peak RSS MB", "{:.0f}"), ("errors", "errors, all rounds", "{:.0f}")]


def median_of(rounds: list[dict], key: str) -> float:
    values = [r[key] for r in rounds if key in r and not math.isnan(r[key])]
    if key == "errors":
        return float(sum(values))
    return statistics.median(values) if values else math.nan


def fmt(value: float, spec: str) -> str:
    return "n/a" if value is None or math.isnan(value) else spec.format(value)


def ratio(results: dict, a: str, b: str, key: str) -> float:
    x, y = median_of(results[a], key), median_of(results[b], key)
    return x / y if y and not math.isnan(x) and not math.isnan(y) else math.nan


def bucket_quantile(buckets: dict[float, float], q: float) -> tuple[float, float, float]:
    """The q-quantile of a Prometheus histogram (cumulative counts by upper bound): the bucket it falls
    in, (low, high], and a linear interpolation inside it as histogram_quantile() does (an estimate:
    only the bucket is measured). NaNs when the histogram is empty; high is inf past the last bound."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if not total:
        return math.nan, math.nan, math.nan
    rank, low, below = q * total, 0.0, 0.0
    for le in bounds:
        if buckets[le] >= rank:
            if math.isinf(le):
                return low, le, low
            inside = buckets[le] - below
            return low, le, low + (le - low) * ((rank - below) / inside if inside else 1.0)
        low, below = le, buckets[le]
    return low, math.inf, low


class Target(NamedTuple):
    """A performance target: the ratio of two targets' medians of one metric, at most or at least a threshold."""

    what: str          # the figure compared, as the report says it
    num: str           # the benchmark target whose figure is divided ...
    den: str           # ... by this one's
    key: str           # a metric of the rounds' rows (table_rows), or HOLD_KB
    threshold: float
    at_most: bool      # met when the ratio is at most the threshold (else: at least)


HOLD_KB = "kb_per_open_stream"   # the open-streams phase's figure: RSS per open stream, KB (not of the rounds)
FLOOR, PLAIN, ALL_ON, LITELLM = "passthrough-pool", "switchyard", "switchyard-all", "litellm"
ONE_WORKER, TWO_WORKERS = "switchyard-limits", "switchyard-limits-2w"   # limits in Redis: the workers share them
NEAR = 0.03         # a ratio this close to its threshold (relative) is taken over NEAR_ROUNDS rounds
NEAR_ROUNDS = 5


def targets(levels: list[int]) -> list[Target]:
    """The performance targets, each a ratio in one interleaved run (docs/performance.md#targets); the
    stream CPU target at each burst size run (`levels`)."""
    out = [Target(f"plain calls: CPU per call @{c} vs the floor's", PLAIN, FLOOR, f"c{c}_cpu_ms_per_req", limit, True)
           for c, limit in ((32, 1.45), (128, 1.30))]
    out += [Target(f"plain calls: req/s @{c} vs the floor's", PLAIN, FLOOR, f"c{c}_rps", 0.80, False)
            for c in CONNECTION_LEVELS]
    out += [Target(f"streams: CPU per 20-chunk stream ({n} at once) vs the floor's", PLAIN, FLOOR,
                   f"s{n}_cpu_ms_per_stream", 1.30, True) for n in levels]
    out += [Target("streams: memory per open stream vs the floor's", PLAIN, FLOOR, HOLD_KB, 1.5, True)]
    out += [Target(f"everything on: req/s @{c} vs plain's", ALL_ON, PLAIN, f"c{c}_rps", 0.85, False)
            for c in CONNECTION_LEVELS]
    out += [Target(f"two workers (limits shared in Redis): CPU per call @{c} vs one worker's", TWO_WORKERS,
                   ONE_WORKER, f"c{c}_cpu_ms_per_req", 1.05, True) for c in CONNECTION_LEVELS]
    out += [Target(f"req/s @{c} vs LiteLLM's", PLAIN, LITELLM, f"c{c}_rps", 10.0, False) for c in CONNECTION_LEVELS]
    out += [Target("500 streams: LiteLLM's TTFC p50 over ours (times better)", LITELLM, PLAIN, "s500_ttfc_p50_ms",
                   10.0, False)]
    return out


def figure(results: dict, hold: dict, name: str, key: str) -> float | None:
    """A target's figure for one benchmark target: the median over rounds, or for HOLD_KB the open-streams
    phase's KB per stream (RSS with every stream open less before them); None when it was not measured."""
    if key == HOLD_KB:
        h = hold.get(name)
        return (h["rss_all_open_mb"] - h["rss_idle_mb"]) * 1024 / h["streams"] if h else None
    rows = results.get(name)
    if not rows or not any(key in r for r in rows):
        return None
    return median_of(rows, key)


def number(v: float) -> str:
    """A median as the report gives it: three significant digits, whole numbers from 100 up."""
    return fmt(v, "{:,.0f}" if abs(v) >= 100 else "{:.3g}")


def target_checks(results: dict, hold: dict, levels: list[int]) -> list[str]:
    """Each target met or **missed** from this run's medians; a ratio within NEAR of its threshold says how
    many rounds it was taken over; the targets whose benchmark targets did not run are named last."""
    out: list[str] = []
    absent: list[str] = []
    for t in targets(levels):
        a, b = figure(results, hold, t.num, t.key), figure(results, hold, t.den, t.key)
        if a is None or b is None:
            name = t.num if a is None else t.den
            absent.append(f"  - {t.what} (" + (f"no open-streams phase of {name})" if t.key == HOLD_KB else
                                               f"{name} did not run)"))
            continue
        r = a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan
        ok = r <= t.threshold if t.at_most else r >= t.threshold   # False for a NaN: missed
        limit = f"{t.threshold:.2f}" if t.threshold < 10 else f"{t.threshold:.0f}"
        out.append(f"- {'met' if ok else '**missed**'}: {t.what} {'≤' if t.at_most else '≥'} {limit}×: "
                   f"{fmt(r, '{:.2f}')}× ({t.num} {number(a)}, {t.den} {number(b)})")
        if not math.isnan(r) and abs(r - t.threshold) <= NEAR * t.threshold:
            if t.key == HOLD_KB:
                out.append(f"  - within {NEAR * 100:.0f} % of its threshold, from one open-streams phase: repeat it "
                           "(`--targets passthrough-pool,switchyard --rounds 0`) before taking the verdict")
                continue
            n = min(len(results[t.num]), len(results[t.den]))
            out.append(f"  - within {NEAR * 100:.0f} % of its threshold: taken over {n} rounds" if n >= NEAR_ROUNDS else
                       f"  - within {NEAR * 100:.0f} % of its threshold over {n} rounds: take it over {NEAR_ROUNDS} "
                       f"(`--rounds {NEAR_ROUNDS}`)")
    if absent:
        out += ["- not measured in this run:", *absent]
    return out


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


def render_markdown(results: dict[str, list[dict]], hold: dict, args, info: dict, command: str, elapsed: float,
                    notes: list[str], failed: dict[str, str]) -> str:
    targets = list(results)
    levels = [n for n, _ in args.streams]
    pairs = [(a, b) for a, b in RATIOS if a in results and b in results]
    streams_desc = ", ".join(f"{n} streams × {b} burst{'s' * (b > 1)}" for n, b in args.streams)
    out = [f"## Benchmark run {info['date']}", "",
           f"Machine: {info['cores']} cores, {info['cpu']}, Linux {info['kernel']}, Python {info['python']}, "
           f"{info['nginx']}, {info['wrk']}" + (f"; LiteLLM {info['litellm']}" if info.get("litellm") else "")
           + ".", "",
           f"Command: `{command}` ({elapsed / 60:.1f} min)", "",
           f"{args.rounds} interleaved rounds; wrk -t{args.wrk_threads} {args.duration:g} s per phase; "
           f"per round {streams_desc}. Medians over rounds; ratios are of the medians.", ""]
    head = "| metric | " + " | ".join(targets) + "".join(f" | {SHORT[a]}/{SHORT[b]}" for a, b in pairs) + " |"
    out += [head, "|" + "---|" * (len(targets) + len(pairs) + 1)]
    for key, label, spec in table_rows(levels):
        row = f"| {label} | " + " | ".join(fmt(median_of(results[t], key), spec) for t in targets) + " |"
        row += "".join(f" {fmt(ratio(results, a, b, key), '{:.2f}') if key != 'errors' else ''} |" for a, b in pairs)
        out.append(row)
    for name, h in hold.items():
        out += ["", f"{name}, a fresh process with the same settings, holding {h['streams']} streams open at once "
                f"(from the paced upstream: 20 chunks over {args.hold_seconds:g} s): "
                f"RSS {fmt(h['rss_all_open_mb'], '{:.0f}')} MB "
                f"while all were open, {fmt(h['rss_idle_mb'], '{:.0f}')} MB before "
                f"({fmt((h['rss_all_open_mb'] - h['rss_idle_mb']) * 1024 / h['streams'], '{:.0f}')} KB per stream), "
                f"peak {fmt(h['rss_peak_mb'], '{:.0f}')} MB; {h['ok']}/{h['streams']} streams complete; "
                f"TTFC p50 {fmt(h['ttfc_p50_ms'], '{:.0f}')} ms with all {h['streams']} sent at once."]
    checks = target_checks(results, hold, levels)
    if checks:
        out += ["", "Performance targets (this run; each a ratio of two medians):", ""] + checks
    cols = ["req/s@32", "p99@32", "req/s@128", "p99@128", "CPU ms/req@128"] + \
        [f"TTFC p50 {n}" for n in levels] + [f"client CPU % {n}" for n in levels] + \
        ["errors", "other CPU % (wrk 32/128, streams)"]
    out += ["", "Per round. other CPU = share of the machine used by processes outside the benchmark during "
            "the phase (above a few % the phase was disturbed); client CPU = the stream client's share of one "
            "core during the bursts (near 100 % the client is the limit):", "",
            "| target | round | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 2)]
    for i in range(args.rounds):
        for t in targets:
            if i < len(results[t]):
                r = results[t][i]
                cells = [fmt(r["c32_rps"], "{:.0f}"), fmt(r["c32_p99_ms"], "{:.1f}"), fmt(r["c128_rps"], "{:.0f}"),
                         fmt(r["c128_p99_ms"], "{:.1f}"), fmt(r["c128_cpu_ms_per_req"], "{:.2f}")]
                cells += [fmt(r.get(f"s{n}_ttfc_p50_ms", math.nan), "{:.0f}") for n in levels]
                cells += [fmt(r.get(f"s{n}_client_cpu_pct", math.nan), "{:.0f}") for n in levels]
                other = "/".join(fmt(r.get(k, math.nan), "{:.0f}") for k in
                                 ["c32_other_cpu_pct", "c128_other_cpu_pct"] + [f"s{n}_other_cpu_pct" for n in levels])
                out.append(f"| {t} | {i + 1} | " + " | ".join(cells) + f" | {r['errors']} | {other} |")
    repeated = sum(r.get("repeated_phases", 0) for rows in results.values() for r in rows)
    if repeated:
        out += ["", f"{repeated} wrk phase(s) were repeated because more than {args.disturbed_pct:g}% of the "
                "machine's CPU went to outside processes; the tables show the last attempt."]
    out += [f"\n{n}" for n in notes]
    for name, reason in failed.items():
        out += ["", f"**{name} {reason.splitlines()[0]}** (see its log in the work dir)"]
    return "\n".join(out) + "\n"


