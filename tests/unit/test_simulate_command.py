"""``switchyard simulate``: strategies compared on simulated engines, the same table for the same seed."""

from __future__ import annotations

import json

import httpx
import pytest
import trio
import trio.testing

from switchyard.actors.kv.events import EventBatch, SourceState
from switchyard.config.simulation import EngineKv, Simulation
from switchyard.protocol.serving.cli import main
from switchyard.protocol.serving.simulate import fleet
from switchyard.protocol.serving.simulate_strategies import STRATEGIES, Strategy, feed_events, unavailable
from switchyard.protocol.simulated.openai import SimulatedTransport
from switchyard.protocol.simulated.workloads import generate

TINY = ["simulate", "--workload", "multi-turn,uniform", "--strategy", "RoundRobin,PrefixAwareHash",
        "--requests", "12", "--backends", "2", "--format", "json"]


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_same_seed_gives_the_same_report(capsys):
    code, first, _ = run(capsys, TINY)
    assert code == 0
    assert run(capsys, TINY)[1] == first
    report = json.loads(first)
    assert list(report["workloads"]) == ["multi-turn", "uniform"]
    for rows in report["workloads"].values():
        assert [r["strategy"] for r in rows] == ["RoundRobin", "PrefixAwareHash"]
        for row in rows:
            assert (row["answered"], row["failed"], sum(row["per_backend"].values())) == (12, 0, 12)
            assert row["ttft_p50_ms"] > 0 and row["requests_per_second"] > 0
    assert report["workloads"]["uniform"][0]["hit_ratio"] < report["workloads"]["multi-turn"][0]["hit_ratio"]
    assert run(capsys, [*TINY[:-2], "--seed", "2", "--format", "json"])[1] != first


def test_the_table_has_a_row_per_strategy(capsys):
    code, out, _ = run(capsys, [*TINY[:-2], "--format", "table"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "workload multi-turn: 12 requests, 2 backends, seed 1"
    assert lines[1].split() == ["strategy", "TTFT", "p50", "ms", "TTFT", "p99", "ms", "hit", "ratio", "req/s",
                                "load", "CV", "failed"]
    assert [line.split()[0] for line in lines[2:4]] == ["RoundRobin", "PrefixAwareHash"]


def test_workloads_are_drawn_from_the_seed_and_hold_the_requests_asked_for():
    for name in ("multi-turn", "shared-prompt", "agents", "uniform"):
        workload = generate(name, 5, 40, 3)
        assert workload == generate(name, 5, 40, 3) != generate(name, 6, 40, 3)
        assert workload.requests == 40
    chats = generate("multi-turn", 1, 200, 4).sessions
    assert all(len(s.turns) > 1 for s in chats[:-1]) and len({s.system for s in chats}) == 1
    assert len({s.system for s in generate("shared-prompt", 1, 200, 4).sessions}) == 8
    assert all(s.system is None and len(s.turns) == 1 for s in generate("uniform", 1, 50, 4).sessions)


def test_a_strategy_this_build_cannot_run_is_skipped_with_its_reason(capsys, monkeypatch):
    future = Strategy("future", lambda config: None, needs="no_such_section")
    assert unavailable(future) == "this build has no no_such_section config section"
    monkeypatch.setitem(STRATEGIES, "future", future)
    code, out, err = run(capsys, [*TINY[:3], "--strategy", "future,RoundRobin", *TINY[5:]])
    assert code == 0
    assert "switchyard simulate: future skipped: this build has no no_such_section config section" in err
    report = json.loads(out)
    assert report["skipped"] == {"future": "this build has no no_such_section config section"}
    assert [r["strategy"] for r in report["workloads"]["uniform"]] == ["RoundRobin"]


def test_the_kv_index_strategies_enable_it_and_the_engines_events():
    config = fleet(2)
    STRATEGIES["kv-events"].edit(config)
    assert config["kv_cache_index"]["enabled"] is True and config["prefix_routing"] == {"enabled": True}
    assert all(b["simulation"]["engine_kv"]["events"] for b in config["backends"])
    # every engine named as an event source: the index trusts its events, keeps no record of its own
    assert sorted(config["kv_cache_index"]["event_sources"]) == sorted(b["name"] for b in config["backends"])
    config = fleet(2)
    STRATEGIES["kv-approximate"].edit(config)
    assert not any(b["simulation"]["engine_kv"]["events"] for b in config["backends"])
    assert config["kv_cache_index"] == {"enabled": True}


class Index:
    """The gateway index's interface as the event sources feed it."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    def state(self, state: SourceState) -> None:
        self.seen.append(state)

    async def apply(self, backend: str, batch: EventBatch) -> None:
        self.seen.append((backend, batch))


class Runtime:
    def __init__(self) -> None:
        self.kv_index = Index()


async def test_the_engines_events_reach_the_index_in_order(autojump_clock, nursery):
    sim = SimulatedTransport("e", Simulation(latency=0, engine_kv=EngineKv(events=True)), ("m",))
    runtime = Runtime()
    assert feed_events(object(), {"e": sim}, nursery) == \
        "this build's runtime has no KV-cache index to feed (runtime.kv_index)"
    assert feed_events(runtime, {"e": sim}, nursery) is None
    async with httpx.AsyncClient(transport=sim, base_url="http://e.simulated") as http:
        await http.post("/v1/chat/completions", json={"model": "m", "messages": [
            {"role": "user", "content": "one two three four five six"}]})   # a block stored, then the answer's
    await trio.testing.wait_all_tasks_blocked()
    seen = runtime.kv_index.seen
    assert seen[0] == SourceState("e", up=True)
    assert [(b, batch.seq) for b, batch in seen[1:]] == [("e", 0), ("e", 1)]


def test_bad_options_are_refused(capsys):
    code, _, err = run(capsys, ["simulate", "--workload", "chess"])
    assert code == 2 and "--workload: unknown chess (known: multi-turn, shared-prompt, agents, uniform, all)" in err
    code, _, err = run(capsys, ["simulate", "--config", "x.yaml", "--backends", "3"])
    assert code == 2 and "--backends sizes the built-in fleet" in err
