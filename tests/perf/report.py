"""The tables tests/perf/bench.py prints: medians over rounds, ratios, the issue's targets, per-round detail.

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
ADMISSION_P50_MAX = 0.001   # seconds: "admission adds under 1 ms at p50"


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


def target_checks(results: dict, hold: dict, levels: list[int], admission: dict | None = None) -> list[str]:
    """The issue's performance targets, each met or missed, from this run's medians."""
    out: list[str] = []

    def line(ok: bool, text: str) -> None:
        out.append(f"- {'met' if ok else '**missed**'}: {text}")

    # The admissions the local share decided are counted by the limiter (rate_limit_fallback_admissions).
    outages = admission.get("outages", 0) if admission else 0
    in_redis = ((admission["count"] - admission.get("fallback", 0.0)) / admission["count"]
                if outages and admission.get("count") else 1.0)

    def limits_line(ok: bool, text: str) -> None:
        if not outages:
            line(ok, text)
        else:
            out.append(f"- **not established** (Redis deemed unavailable {outages} times: about "
                       f"{100 * min(in_redis, 1.0):.0f} % of the admissions were decided in Redis, the rest by "
                       f"the local share): {text}")

    if "switchyard-limits" in results and "switchyard-keyed" in results:
        for c in CONNECTION_LEVELS:
            r = ratio(results, "switchyard-limits", "switchyard-keyed", f"c{c}_rps")
            limits_line(r >= 0.85, f"limits on (Redis): req/s @{c} ≥ 0.85× no limits: {fmt(r, '{:.2f}')}×")
    if admission and admission.get("count"):
        p50 = admission["p50"]
        limits_line(p50["high_s"] <= ADMISSION_P50_MAX,
                    f"limits on (Redis): admission p50 < 1 ms: in the bucket ({fmt(p50['low_s'] * 1e3, '{:.2g}')}, "
                    f"{fmt(p50['high_s'] * 1e3, '{:.2g}')}] ms of {admission['count']:,.0f} admissions "
                    f"(mean {fmt(admission['mean_s'] * 1e3, '{:.2f}')} ms)")
    if "switchyard-limits-2w" in results and "switchyard-limits" in results:
        for c in CONNECTION_LEVELS:
            r = ratio(results, "switchyard-limits-2w", "switchyard-limits", f"c{c}_cpu_ms_per_req")
            line(r <= 1.05, f"two workers (limits shared in Redis): CPU per request @{c} ≤ 1.05× one worker's: "
                            f"{fmt(r, '{:.2f}')}×")
    if "switchyard" not in results:
        return out

    def floor(text: str) -> None:   # informational: what the stack itself does, no target to meet
        out.append(f"- floor: the pooled pass-through, with no routing at all, {text}")

    sy, pool = results["switchyard"], results.get("passthrough-pool")
    for c in CONNECTION_LEVELS:
        v = median_of(sy, f"c{c}_rps")
        line(v >= 1000, f"req/s @{c} ≥ 1,000: {fmt(v, '{:.0f}')}")
        if "litellm" in results:
            r = ratio(results, "switchyard", "litellm", f"c{c}_rps")
            line(r >= 10, f"req/s @{c} ≥ 10× LiteLLM: {fmt(r, '{:.1f}')}×")
            if pool is not None:
                floor(f"{fmt(ratio(results, 'passthrough-pool', 'litellm', f'c{c}_rps'), '{:.1f}')}× LiteLLM "
                      f"@{c} ({fmt(median_of(pool, f'c{c}_rps'), '{:.0f}')} req/s)")
    v = median_of(sy, "c128_p99_ms")
    line(v < 150, f"p99 @128 < 150 ms: {fmt(v, '{:.0f}')} ms")
    if pool is not None:
        floor(f"p99 @128 {fmt(median_of(pool, 'c128_p99_ms'), '{:.0f}')} ms")
    for n in levels:
        v = median_of(sy, f"s{n}_cpu_ms_per_stream")
        line(v <= 3, f"CPU per 20-chunk stream ≤ 3 ms ({n} streams): {fmt(v, '{:.2f}')} ms")
    if "litellm" in results and 500 in levels:
        r = ratio(results, "litellm", "switchyard", "s500_ttfc_p50_ms")
        line(r >= 10, f"500 streams: TTFC p50 ≥ 10× better than LiteLLM: {fmt(r, '{:.1f}')}×")
    if "switchyard" in hold:
        v = hold["switchyard"]["rss_all_open_mb"]
        line(v <= 60, f"RSS ≤ 60 MB holding {hold['switchyard']['streams']} open streams: {fmt(v, '{:.0f}')} MB")
    if "passthrough-pool" in hold:
        h = hold["passthrough-pool"]
        floor(f"holds {h['streams']} open streams in {fmt(h['rss_all_open_mb'], '{:.0f}')} MB "
              f"({fmt(h['rss_idle_mb'], '{:.0f}')} MB before them)")
    if "switchyard-features" in results:
        for c in CONNECTION_LEVELS:
            r = ratio(results, "switchyard-features", "switchyard", f"c{c}_rps")
            line(r >= 0.85, f"features on: req/s @{c} ≥ 0.85× features off: {fmt(r, '{:.2f}')}×")
    if "switchyard-all" in results:
        for c in CONNECTION_LEVELS:
            r = ratio(results, "switchyard-all", "switchyard", f"c{c}_rps")
            line(r >= 0.80, f"everything on: req/s @{c} ≥ 0.80× the plain build: {fmt(r, '{:.2f}')}×")
    if pool is not None:
        for c in CONNECTION_LEVELS:
            r = ratio(results, "switchyard", "passthrough-pool", f"c{c}_rps")
            line(r >= 0.90, f"plain calls: req/s @{c} ≥ 0.90× the floor: {fmt(r, '{:.2f}')}×")
            r = ratio(results, "switchyard", "passthrough-pool", f"c{c}_cpu_ms_per_req")
            line(r <= 1.15, f"plain calls: CPU per request @{c} ≤ 1.15× the floor's: {fmt(r, '{:.2f}')}×")
        for n in levels:
            r = ratio(results, "switchyard", "passthrough-pool", f"s{n}_cpu_ms_per_stream")
            line(r <= 1.15, f"streams: CPU per 20-chunk stream ({n}) ≤ 1.15× the floor's: "
                                          f"{fmt(r, '{:.2f}')}×")
    if "switchyard" in hold and "passthrough-pool" in hold:
        per = {t: (hold[t]["rss_all_open_mb"] - hold[t]["rss_idle_mb"]) * 1024 / hold[t]["streams"]
               for t in ("switchyard", "passthrough-pool")}
        r = per["switchyard"] / per["passthrough-pool"] if per["passthrough-pool"] > 0 else float("nan")
        line(r <= 1.25, f"streams: memory per open stream ≤ 1.25× the floor's: {per['switchyard']:.0f} KB vs "
                        f"{per['passthrough-pool']:.0f} KB, {fmt(r, '{:.2f}')}×")
    if "switchyard-memledger" in results:   # `switchyard` runs the default ledger, SQLite
        for c in CONNECTION_LEVELS:
            r = ratio(results, "switchyard", "switchyard-memledger", f"c{c}_rps")
            line(r >= 0.95, f"ledger on (SQLite): req/s @{c} ≥ 0.95× ledger off (memory): {fmt(r, '{:.2f}')}×")
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
                    notes: list[str], failed: dict[str, str], admission: dict | None = None) -> str:
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
    checks = target_checks(results, hold, levels, admission)
    if checks:
        out += ["", "Issue targets (this run):", ""] + checks
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


