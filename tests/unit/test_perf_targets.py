"""The benchmark's performance targets (tests/perf/report.py): the list docs/performance.md gives, each line
of the report the right ratio against the right threshold. Synthetic medians only: nothing is timed here."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "perf" / "report.py"
spec = importlib.util.spec_from_file_location("perf_report", PATH)
assert spec is not None and spec.loader is not None
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

FLOOR, PLAIN, ALL_ON, LITELLM = "passthrough-pool", "switchyard", "switchyard-all", "litellm"
ONE, TWO = "switchyard-limits", "switchyard-limits-2w"


def test_the_targets_are_the_documented_list():
    got = {(t.num, t.den, t.key, t.threshold, t.at_most) for t in report.targets([100, 500])}
    assert got == {
        (PLAIN, FLOOR, "c32_cpu_ms_per_req", 1.45, True), (PLAIN, FLOOR, "c128_cpu_ms_per_req", 1.30, True),
        (PLAIN, FLOOR, "c32_rps", 0.80, False), (PLAIN, FLOOR, "c128_rps", 0.80, False),
        (PLAIN, FLOOR, "s100_cpu_ms_per_stream", 1.30, True), (PLAIN, FLOOR, "s500_cpu_ms_per_stream", 1.30, True),
        (PLAIN, FLOOR, report.HOLD_KB, 1.5, True),
        (ALL_ON, PLAIN, "c32_rps", 0.85, False), (ALL_ON, PLAIN, "c128_rps", 0.85, False),
        (TWO, ONE, "c32_cpu_ms_per_req", 1.05, True), (TWO, ONE, "c128_cpu_ms_per_req", 1.05, True),
        (PLAIN, LITELLM, "c32_rps", 10.0, False), (PLAIN, LITELLM, "c128_rps", 10.0, False),
        (LITELLM, PLAIN, "s500_ttfc_p50_ms", 10.0, False),
    }


def synthetic(target, ratio: float, rounds: int = 3) -> tuple[dict, dict]:
    """(results, hold) in which `target`'s figure is measured and its ratio is `ratio`, nothing else."""
    if target.key == report.HOLD_KB:   # KB per open stream: (all open - idle) * 1024 / streams
        def held(kb: float) -> dict:
            return {"rss_idle_mb": 60.0, "rss_all_open_mb": 60.0 + kb * 1000 / 1024, "streams": 1000}
        return {}, {target.num: held(18.0 * ratio), target.den: held(18.0)}
    den = [{target.key: 2.0 + i, "errors": 0} for i in range(rounds)]   # median 2 + (rounds - 1) / 2
    num = [{target.key: (2.0 + i) * ratio, "errors": 0} for i in range(rounds)]
    return {target.num: num, target.den: den}, {}


def line_of(checks: list[str], target) -> str:
    found = [line for line in checks
             if line.startswith(("- met: ", "- **missed**: ")) and line.split(": ", 1)[1].startswith(target.what + " ")]
    assert len(found) == 1, checks
    return found[0]


@pytest.mark.parametrize("target", report.targets([100, 500]), ids=lambda t: t.what)
@pytest.mark.parametrize("side", ["inside", "outside"])
def test_each_target_is_its_ratio_against_its_threshold(target, side):
    inside = 0.9 if target.at_most else 1.1
    ratio = target.threshold * (inside if side == "inside" else 1 / inside)
    results, hold = synthetic(target, ratio)
    line = line_of(report.target_checks(results, hold, [100, 500]), target)
    assert line.startswith("- met: " if side == "inside" else "- **missed**: ")
    m = re.search(r" ([≤≥]) ([\d.]+)×: ([\d.]+)× ", line)
    assert m and m[1] == ("≤" if target.at_most else "≥") and float(m[2]) == target.threshold
    assert float(m[3]) == pytest.approx(ratio, abs=0.006)   # printed to two decimals


def test_a_target_that_could_not_be_computed_is_missed():
    target = report.targets([100])[0]
    results = {target.num: [{target.key: math.nan, "errors": 0}], target.den: [{target.key: 1.0, "errors": 0}]}
    assert line_of(report.target_checks(results, {}, [100]), target).startswith("- **missed**: ")


@pytest.mark.parametrize(("rounds", "off", "says"), [(3, 0.02, "take it over 5 (`--rounds 5`)"),
                                                    (5, 0.02, "taken over 5 rounds"), (3, 0.05, None)])
def test_a_ratio_near_its_threshold_is_taken_over_five_rounds(rounds, off, says):
    target = next(t for t in report.targets([100]) if t.key == "c128_rps" and t.den == FLOOR)
    results, hold = synthetic(target, target.threshold * (1 + off), rounds)
    checks = report.target_checks(results, hold, [100])
    advice = [line for line in checks if line.startswith("  - within 3 %")]
    assert advice == ([] if says is None else [advice[0]])
    assert says is None or advice[0].endswith(says)


def test_the_targets_whose_benchmark_targets_did_not_run_are_named():
    target = next(t for t in report.targets([100]) if t.num == ALL_ON)
    results, hold = synthetic(target, 1.0)
    checks = report.target_checks(results, hold, [100])
    assert sum(line.startswith(("- met: ", "- **missed**: ")) for line in checks) == 1
    absent = checks[checks.index("- not measured in this run:") + 1:]
    assert len(absent) == len(report.targets([100])) - 1
    assert "  - two workers (limits shared in Redis): CPU per call @32 vs one worker's (switchyard-limits-2w did not " \
           "run)" in absent
    assert "  - streams: memory per open stream vs the floor's (no open-streams phase of switchyard)" in absent
