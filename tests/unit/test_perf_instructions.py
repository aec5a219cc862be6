"""tests/perf/instructions.py's variants: each config is the benchmark's own (tests/perf/targets.py's builder),
so a count stands for the target it names. Nothing is run under valgrind here."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from switchyard.config.load import load_text

PERF = Path(__file__).resolve().parents[1] / "perf"
sys.path.insert(0, str(PERF))
spec = importlib.util.spec_from_file_location("perf_instructions", PERF / "instructions.py")
assert spec is not None and spec.loader is not None
instructions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(instructions)
import targets  # noqa: E402  (tests/perf, on the path above)

REDIS = "redis://127.0.0.1:6390/0"
NGINX = 18080


def unported(text: str) -> str:
    """The config without its free ports (the server's and the paced upstream's), which differ per write."""
    return re.sub(r"127\.0\.0\.1:(?!%d)\d+" % NGINX, "127.0.0.1:PORT", text)


@pytest.fixture
def made_keys(monkeypatch):
    made = []

    def make_db_key(base, config, env, timeout=60.0, limits=False):
        made.append((config.name, env["XDG_DATA_HOME"], limits))
        return "sk-made-in-the-database"
    monkeypatch.setattr(targets, "make_db_key", make_db_key)
    return made


def test_all_semantic_is_switchyard_all_as_bench_builds_it(tmp_path, made_keys):
    """bench.py's switchyard-all: features, limits in Redis, guardrails, the exact and semantic cache, OTLP to
    nginx, a database key with the limits; here with its intervals stretched, and nothing else changed."""
    config = instructions.write_config("all-semantic", tmp_path, NGINX, REDIS)
    bench = targets.write_switchyard_config(tmp_path / "bench.yaml", 1, NGINX, 2, True, None, limits_redis=REDIS,
                                            guardrails=True, cache=True, semantic=True,
                                            otlp=f"http://127.0.0.1:{NGINX}", db_key=True)
    assert unported(config.read_text()) == unported(instructions.stretched(bench.read_text()))
    assert made_keys == [("all-semantic.yaml", str(tmp_path / "all-semantic-data"), True)]
    assert (tmp_path / "all-semantic.key").read_text() == "sk-made-in-the-database"
    assert instructions.environment("all-semantic", tmp_path)["OPENBLAS_NUM_THREADS"] == "1"


@pytest.mark.parametrize("variant", ["all", "all-dbkey", "all-exact", "all-semantic"])
def test_each_step_adds_its_part_and_the_config_loads(tmp_path, made_keys, variant):
    text = instructions.write_config(variant, tmp_path, NGINX, REDIS).read_text()
    load_text(text, base_dir=tmp_path)   # a valid config
    assert ("api_keys:" in text) == (variant == "all")
    assert ("response_cache:" in text) == (variant in ("all-exact", "all-semantic"))
    assert ("semantic:" in text) == (variant == "all-semantic")
    assert ("fallback:" in text) == (variant in ("all", "all-dbkey"))   # a model with a chain bypasses the cache
    assert "flush_interval: 60" in text and "export_interval: 60" in text
    assert bool(made_keys) == (variant != "all")
