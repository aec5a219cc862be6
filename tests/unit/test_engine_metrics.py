"""Engine pages (actors/routing/engine_metrics.py): vLLM and SGLang expositions in their own
metric names, malformed and foreign pages, throughput from counters. Pure, no clock."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from switchyard.actors.routing.engine_metrics import (
    SGLANG,
    VLLM,
    EngineSnapshot,
    parse_exposition,
    throughput,
)

# vLLM V1 (0.10+): per-engine series labelled engine and model_name; two data-parallel engines.
VLLM_V1 = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 9.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.3
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.5e+06
vllm:generation_tokens_total{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 500000.0
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7283e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 42.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 42.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.25
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="27153"} 1.0
"""

# vLLM V0 (before 0.10): model_name only, the KV gauge under its old name.
VLLM_V0 = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama-2-7b"} 2.0
# HELP vllm:num_requests_swapped Number of requests swapped to CPU.
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="llama-2-7b"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="llama-2-7b"} 0.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="llama-2-7b"} 0.0625
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="llama-2-7b"} 1024.0
"""

# SGLang (python/sglang/srt/metrics/collector.py): model_name and rank labels, two tensor-parallel ranks.
SGLANG_PAGE = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 0.28
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="1"} 0.32
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 162.0
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="1"} 10.0
# HELP sglang:num_used_tokens The number of used tokens.
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 123859.0
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 86.50814177726902
sglang:gen_throughput{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="1"} 13.49185822273098
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 2826.0
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="1"} 4.0
# HELP sglang:max_running_requests Maximum running requests
# TYPE sglang:max_running_requests gauge
sglang:max_running_requests{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 256.0
sglang:max_running_requests{model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="1"} 256.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.3518979474117756e+06
sglang:time_to_first_token_seconds_bucket{le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 11008.0
sglang:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 11008.0
"""

# Switchyard's own /metrics, or any exporter that is not an engine.
FOREIGN = """\
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
# HELP http_requests_total Requests.
# TYPE http_requests_total counter
http_requests_total{route="/v1/chat/completions",status="200"} 3.0
"""


def test_vllm_v1_page_sums_series_and_averages_kv_usage():
    snap = parse_exposition(VLLM_V1, observed_at=100.0)
    assert snap == EngineSnapshot(engine=VLLM, waiting=7, running=21, observed_at=100.0, total_slots=None,
                                  kv_cache_usage=pytest.approx(0.4), generation_tokens_total=2.0e6,
                                  gen_throughput=None)


def test_vllm_v0_page_reads_the_old_kv_gauge():
    snap = parse_exposition(VLLM_V0, observed_at=5.0)
    assert (snap.engine, snap.waiting, snap.running, snap.kv_cache_usage) == (VLLM, 0, 2, 0.0625)
    assert snap.generation_tokens_total == 1024.0 and snap.total_slots is None and snap.gen_throughput is None


def test_vllm_prefers_the_current_kv_gauge_when_both_are_present():
    page = VLLM_V0 + 'vllm:kv_cache_usage_perc{model_name="llama-2-7b"} 0.75\n'
    assert parse_exposition(page, 0.0).kv_cache_usage == 0.75


def test_sglang_page_reads_queue_usage_slots_and_throughput_gauge():
    snap = parse_exposition(SGLANG_PAGE, observed_at=7.0)
    assert (snap.engine, snap.waiting, snap.running, snap.total_slots) == (SGLANG, 2830, 172, 512)
    assert snap.kv_cache_usage == pytest.approx(0.30)
    assert snap.gen_throughput == pytest.approx(100.0)
    assert snap.generation_tokens_total == 7.557572e6
    assert snap.observed_at == 7.0 and snap.age(10.5) == 3.5


def test_sample_lines_without_help_or_type_are_read():
    page = 'vllm:num_requests_waiting{engine="0",model_name="m"} 5\nvllm:num_requests_running 1\n'
    snap = parse_exposition(page, 0.0)
    assert (snap.waiting, snap.running, snap.kv_cache_usage, snap.generation_tokens_total) == (5, 1, None, None)


def test_optional_metrics_absent_are_none_and_running_absent_is_zero():
    snap = parse_exposition("# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs 3\n", 0.0)
    assert snap == EngineSnapshot(engine=SGLANG, waiting=3, running=0, observed_at=0.0)


@pytest.mark.parametrize("page", [
    "",
    FOREIGN,
    "<html><body><h1>404 Not Found</h1></body></html>\n",
    '{"status": "ok"}\n',
    # a running gauge without the queue gauge is not enough to rank by
    "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 4\n",
])
def test_pages_without_an_engine_queue_gauge_are_none(page):
    assert parse_exposition(page, 0.0) is None


@pytest.mark.parametrize("line", [
    'vllm:num_requests_waiting{engine="0",model_name="m"} many',
    'vllm:num_requests_waiting{engine="0",model_name="m" 3',
    'vllm:num_requests_waiting{engine="0",model_name=m} 3',
    "sglang:num_queue_reqs",
])
def test_malformed_engine_lines_raise_a_clear_value_error(line):
    with pytest.raises(ValueError, match="malformed Prometheus exposition"):
        parse_exposition(VLLM_V0 + line + "\n", 0.0)


def test_lines_of_other_metrics_are_never_parsed():
    # only the engine metrics selection reads reach the parser; a broken histogram line elsewhere is no concern
    page = VLLM_V0 + 'vllm:e2e_request_latency_seconds_bucket{le="0.3" garbage\n'
    assert parse_exposition(page, 0.0).running == 2


def test_non_finite_values_count_as_absent():
    page = VLLM_V0.replace("vllm:gpu_cache_usage_perc{model_name=\"llama-2-7b\"} 0.0625",
                           "vllm:gpu_cache_usage_perc{model_name=\"llama-2-7b\"} NaN")
    assert parse_exposition(page, 0.0).kv_cache_usage is None
    assert parse_exposition('sglang:num_queue_reqs +Inf\n', 0.0) is None


def test_kv_usage_is_clamped_to_a_fraction():
    assert parse_exposition("vllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 1.02\n", 0.0).kv_cache_usage == 1.0


def test_a_zero_slot_cap_says_nothing():
    page = "sglang:num_queue_reqs 1\nsglang:max_running_requests 0\n"
    assert parse_exposition(page, 0.0).total_slots is None


def _page(kind, waiting, running, usage, tokens):
    """A page rendered by prometheus-client itself, one series per rank."""
    names = {VLLM: ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                    "vllm:generation_tokens"),
             SGLANG: ("sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage",
                      "sglang:generation_tokens")}[kind]
    families = [GaugeMetricFamily(name, "doc", labels=["engine"]) for name in names[:3]]
    families.append(CounterMetricFamily(names[3], "doc", labels=["engine"]))
    for rank, values in enumerate(zip(waiting, running, usage, tokens, strict=False)):
        for family, value in zip(families, values, strict=False):
            family.add_metric([str(rank)], value)

    class Page:
        def collect(self):
            return families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Page())
    return generate_latest(registry).decode()


@given(kind=st.sampled_from([VLLM, SGLANG]), ranks=st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 10_000), min_size=n, max_size=n),
    st.lists(st.integers(0, 1_000), min_size=n, max_size=n),
    st.lists(st.floats(0, 1), min_size=n, max_size=n),
    st.lists(st.integers(0, 10**12), min_size=n, max_size=n))))
def test_rendered_pages_fold_every_series(kind, ranks):
    waiting, running, usage, tokens = ranks
    snap = parse_exposition(_page(kind, waiting, running, usage, tokens), 3.0)
    assert (snap.engine, snap.waiting, snap.running) == (kind, sum(waiting), sum(running))
    assert snap.kv_cache_usage == pytest.approx(sum(usage) / len(usage))
    assert snap.generation_tokens_total == pytest.approx(sum(tokens))


# --- throughput -----------------------------------------------------------------------------

def snap(at, tokens, engine=VLLM, gauge=None):
    return EngineSnapshot(engine=engine, waiting=0, running=0, observed_at=at,
                          generation_tokens_total=tokens, gen_throughput=gauge)


@pytest.mark.parametrize("previous, current, expected", [
    (snap(0.0, 1000.0), snap(15.0, 2500.0), 100.0),      # the counter's rate between two polls
    (snap(0.0, 1000.0), snap(15.0, 1000.0), 0.0),        # idle: a rate, and zero
    (None, snap(15.0, 2500.0), None),                    # the first poll has nothing to compare with
    (snap(0.0, 9000.0), snap(15.0, 200.0), None),        # counter went down: the engine restarted
    (snap(15.0, 1000.0), snap(15.0, 2000.0), None),      # no time between the samples
    (snap(20.0, 1000.0), snap(15.0, 2000.0), None),      # out of order
    (snap(0.0, None), snap(15.0, 2000.0), None),         # no counter on one page
    (snap(0.0, 1000.0), snap(15.0, None), None),
    (snap(0.0, 1000.0, SGLANG), snap(15.0, 2500.0), None),   # another engine behind the address now
    (None, snap(15.0, None, SGLANG, gauge=86.5), 86.5),       # the engine's own gauge wins, first poll too
    (snap(0.0, 9000.0, SGLANG), snap(15.0, 200.0, SGLANG, gauge=12.0), 12.0),
])
def test_throughput_table(previous, current, expected):
    assert throughput(previous, current) == expected


def test_throughput_of_a_parsed_pair():
    before = parse_exposition(VLLM_V1, 100.0)
    after = parse_exposition(VLLM_V1.replace("} 500000.0", "} 530000.0"), 115.0)
    assert math.isclose(throughput(before, after), 2000.0)


@pytest.mark.parametrize("page", [
    'vllm:num_requests_waiting{a="1"} 1e308\nvllm:num_requests_waiting{a="2"} 1e308\n',   # the sum overflows
    "vllm:num_requests_waiting -3\n",
    "vllm:num_requests_waiting 0\nvllm:num_requests_running 5e12\n",
])
def test_counts_no_engine_could_report_are_a_malformed_page(page):
    with pytest.raises(ValueError, match="malformed Prometheus exposition"):
        parse_exposition(page, 0.0)
