"""One test per rule of the resilience sections: timeouts, retry, fallback, streaming.

Like test_config.py, every error is asserted as the exact string the user sees:
the dotted path, then the rule.
"""

import pytest

from switchyard.config.load import ConfigError, load_text
from switchyard.config.resilience import DEFAULT_CONTINUATION_PROMPT, ModelTimeouts

MINIMAL = """
backends:
  - name: a
    url: http://127.0.0.1:8000
    models: [m]
"""

# Discovery off and exact names only: the only setting in which chain entries
# are checked against backends[].models.
EXACT_ONLY = """
backends:
  - name: a
    url: http://127.0.0.1:8000
    models: [gpt-4o, gpt-4o-mini]
    discovery: false
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(text, env={})
    return info.value.errors


def warnings_of(text: str) -> tuple[str, ...]:
    return load_text(text, env={}).warnings


def snapshot(text: str):
    return load_text(text, env={}).snapshot


# --- defaults and the full shape ----------------------------------------------

def test_resilience_defaults_when_sections_absent():
    snap = snapshot(MINIMAL)
    t = snap.timeouts
    assert t.connection == 10
    assert (t.standard.first_byte, t.standard.total) == (60, 300)
    assert (t.streaming.first_byte, t.streaming.chunk_interval, t.streaming.total) == (120, 30, 600)
    assert t.model_overrides == {}
    assert (t.max_chunk_interval, t.streaming_fallback_budget_multiplier) == (60, 2.0)
    r = snap.retry
    assert (r.max_attempts, r.initial_delay, r.max_delay, r.backoff_multiplier, r.jitter) == (3, 0.1, 30, 2.0, True)
    assert r.retryable_status_codes == {429, 500, 502, 503, 504, 529}
    assert r.retryable_errors == {"ConnectionError", "TimeoutError"}
    assert r.timeout is None
    f = snap.fallback
    assert (f.enabled, f.mid_stream_enabled, f.fallback_chains, f.model_settings) == (False, True, {}, {})
    p = f.fallback_policy
    assert p.trigger_conditions.error_codes == {429, 500, 502, 503, 504, 529}
    tc = p.trigger_conditions
    assert all((tc.timeout, tc.connection_error, tc.model_not_found, tc.backend_unhealthy,
                tc.context_window_exceeded))
    assert (p.max_fallback_attempts, p.fallback_timeout_multiplier, p.preserve_parameters,
            p.max_concurrent_dials_per_backend, p.content_policy_fallback) == (3, 1.5, True, 50, False)
    assert (f.empty_reply_retry.enabled, f.empty_reply_retry.max_extra_hops) == (False, 1)
    m = snap.streaming.mid_stream_fallback
    assert (m.enabled, m.min_accumulated_tokens, m.max_fallback_attempts, m.same_model_first,
            m.continuation_style) == (True, 50, 2, False, "auto")
    assert m.continuation_prompt == DEFAULT_CONTINUATION_PROMPT
    b = snap.backends[0]
    assert (b.retry_override, b.replay) == (None, True)


def test_full_resilience_example_loads():
    snap = snapshot(EXACT_ONLY + """
timeouts:
  connection: 5s
  request:
    standard: {first_byte: 30s, total: 2m}
    streaming: {first_byte: 1m, chunk_interval: 10s, total: 10m}
    model_overrides:
      gpt-4o:
        standard: {total: 5m}
        streaming: {first_byte: 2m, chunk_interval: 45s}
  limits:
    max_chunk_interval: 50s
  streaming_fallback_budget_multiplier: 3
retry:
  max_attempts: 5
  initial_delay: 0s
  max_delay: 10s
  backoff_multiplier: 1.5
  jitter: false
  retryable_status_codes: [429, 503]
  retryable_errors: [TimeoutError]
fallback:
  enabled: true
  mid_stream_enabled: false
  fallback_chains:
    gpt-4o: [gpt-4o-mini]
  fallback_policy:
    trigger_conditions: {error_codes: [503], timeout: false, connection_error: false, model_not_found: false,
                         backend_unhealthy: false, context_window_exceeded: false}
    max_fallback_attempts: 0
    fallback_timeout_multiplier: 2
    preserve_parameters: false
    max_concurrent_dials_per_backend: 0
    content_policy_fallback: true
  empty_reply_retry: {enabled: true, max_extra_hops: 5}
  model_settings:
    gpt-4o: {fallback_enabled: false, notify_on_fallback: false}
streaming:
  mid_stream_fallback:
    enabled: false
    min_accumulated_tokens: 0
    max_fallback_attempts: 10
    continuation_prompt: Go on.
    same_model_first: true
    continuation_style: prompt
""")
    t = snap.timeouts
    assert t.connection == 5
    assert (t.standard.first_byte, t.standard.total) == (30, 120)
    assert (t.streaming.first_byte, t.streaming.chunk_interval, t.streaming.total) == (60, 10, 600)
    assert t.model_overrides == {"gpt-4o": ModelTimeouts(standard_total=300, first_byte=120, chunk_interval=45)}
    assert (t.max_chunk_interval, t.streaming_fallback_budget_multiplier) == (50, 3.0)
    r = snap.retry
    assert (r.max_attempts, r.initial_delay, r.max_delay, r.backoff_multiplier, r.jitter) == (5, 0, 10, 1.5, False)
    assert (r.retryable_status_codes, r.retryable_errors) == ({429, 503}, {"TimeoutError"})
    f = snap.fallback
    assert (f.enabled, f.mid_stream_enabled) == (True, False)
    assert f.fallback_chains == {"gpt-4o": ("gpt-4o-mini",)}
    p = f.fallback_policy
    assert p.trigger_conditions.error_codes == {503}
    assert not p.trigger_conditions.context_window_exceeded
    assert (p.max_fallback_attempts, p.fallback_timeout_multiplier, p.preserve_parameters,
            p.max_concurrent_dials_per_backend, p.content_policy_fallback) == (0, 2.0, False, 0, True)
    assert (f.empty_reply_retry.enabled, f.empty_reply_retry.max_extra_hops) == (True, 5)
    assert not f.model_settings["gpt-4o"].fallback_enabled
    assert not f.model_settings["gpt-4o"].notify_on_fallback
    m = snap.streaming.mid_stream_fallback
    assert (m.enabled, m.min_accumulated_tokens, m.max_fallback_attempts, m.continuation_prompt,
            m.same_model_first, m.continuation_style) == (False, 0, 10, "Go on.", True, "prompt")


# --- timeouts ------------------------------------------------------------------

def test_chunk_interval_above_max_chunk_interval_is_error():
    assert errors_of(MINIMAL + "timeouts: {request: {streaming: {chunk_interval: 61s}}}\n") == [
        "timeouts.request.streaming.chunk_interval: is too large, maximum is 60s"]


def test_model_override_chunk_interval_above_max_chunk_interval_is_error():
    assert errors_of(MINIMAL + "timeouts: {request: {model_overrides: {gemini-2.5-pro: "
                               "{streaming: {chunk_interval: 2m}}}}}\n") == [
        "timeouts.request.model_overrides.gemini-2.5-pro.streaming.chunk_interval: is too large, maximum is 60s"]


def test_raised_max_chunk_interval_admits_longer_chunk_interval_and_is_named_in_error():
    snap = snapshot(MINIMAL + "timeouts: {limits: {max_chunk_interval: 90s}, request: {streaming: "
                              "{chunk_interval: 90s}}}\n")
    assert snap.timeouts.streaming.chunk_interval == 90
    assert errors_of(MINIMAL + "timeouts: {limits: {max_chunk_interval: 90s}, request: {streaming: {chunk_interval: "
                               "91s}, model_overrides: {m: {streaming: {chunk_interval: 2m}}}}}\n") == [
        "timeouts.request.streaming.chunk_interval: is too large, maximum is 90s",
        "timeouts.request.model_overrides.m.streaming.chunk_interval: is too large, maximum is 90s",
    ]


def test_max_chunk_interval_above_300s_ceiling_is_error():
    # The chunk interval is not judged against a ceiling that is itself wrong.
    assert errors_of(MINIMAL + "timeouts: {limits: {max_chunk_interval: 301s}, request: {streaming: "
                               "{chunk_interval: 200s}}}\n") == [
        "timeouts.limits.max_chunk_interval: must be at most 300s, got '301s'"]
    assert snapshot(MINIMAL + "timeouts: {limits: {max_chunk_interval: 5m}}\n").timeouts.max_chunk_interval == 300


def test_max_chunk_interval_below_default_chunk_interval_is_error_at_chunk_interval():
    assert errors_of(MINIMAL + "timeouts: {limits: {max_chunk_interval: 20s}}\n") == [
        "timeouts.request.streaming.chunk_interval: is too large, maximum is 20s (not set: the default is 30s)"]


def test_first_byte_and_total_must_be_greater_than_zero():
    assert errors_of(MINIMAL + """
timeouts:
  request:
    standard: {first_byte: 0s, total: 0}
    streaming: {first_byte: 0ms, chunk_interval: 0s, total: 0s}
    model_overrides:
      m: {standard: {first_byte: 0s}, streaming: {total: 0s}}
""") == [
        "timeouts.request.standard.first_byte: must be greater than zero",
        "timeouts.request.standard.total: must be greater than zero",
        "timeouts.request.streaming.first_byte: must be greater than zero",
        "timeouts.request.streaming.chunk_interval: must be greater than zero",
        "timeouts.request.streaming.total: must be greater than zero",
        "timeouts.request.model_overrides.m.standard.first_byte: must be greater than zero",
        "timeouts.request.model_overrides.m.streaming.total: must be greater than zero",
    ]


def test_streaming_first_byte_or_chunk_interval_longer_than_total_warns():
    assert warnings_of(MINIMAL + "timeouts: {request: {streaming: {first_byte: 20s, chunk_interval: 15s, "
                                 "total: 10s}}}\n") == (
        "timeouts.request.streaming.first_byte: is longer than total: the total limit ends the stream first",
        "timeouts.request.streaming.chunk_interval: is longer than total: the total limit ends the stream first",
    )


def test_streaming_total_shorter_than_default_first_byte_warns_at_total():
    assert warnings_of(MINIMAL + "timeouts: {request: {streaming: {total: 100s}}}\n") == (
        "timeouts.request.streaming.total: is shorter than first_byte (120s): the total limit ends the stream first",)


def test_model_override_longer_than_total_warns_against_effective_values():
    assert warnings_of(MINIMAL + "timeouts: {request: {model_overrides: {m: {streaming: "
                                 "{first_byte: 11m}}, n: {streaming: {total: 20s}}}}}\n") == (
        "timeouts.request.model_overrides.m.streaming.first_byte: is longer than total: "
        "the total limit ends the stream first",
        "timeouts.request.model_overrides.n.streaming.total: is shorter than first_byte (120s): "
        "the total limit ends the stream first",
        "timeouts.request.model_overrides.n.streaming.total: is shorter than chunk_interval (30s): "
        "the total limit ends the stream first",
    )


def test_standard_first_byte_longer_than_total_is_not_warned():
    assert warnings_of(MINIMAL + "timeouts: {request: {standard: {first_byte: 10m, total: 1m}}}\n") == ()


def test_streaming_fallback_budget_multiplier_between_1_and_10():
    assert errors_of(MINIMAL + "timeouts: {streaming_fallback_budget_multiplier: 0.5}\n") == [
        "timeouts.streaming_fallback_budget_multiplier: must be at least 1, got 0.5"]
    assert errors_of(MINIMAL + "timeouts: {streaming_fallback_budget_multiplier: 11}\n") == [
        "timeouts.streaming_fallback_budget_multiplier: must be at most 10, got 11"]


def test_model_override_keys_follow_model_name_rules():
    assert errors_of(MINIMAL + "timeouts: {request: {model_overrides: {'gpt 4o': {}}}}\n") == [
        "timeouts.request.model_overrides.gpt 4o: model name has ' ' (U+0020) at byte offset 3; "
        "only letters, digits and - _ . / : are allowed (got 'gpt 4o')"]


def test_unknown_timeouts_keys_are_errors():
    assert errors_of(MINIMAL + """
timeouts:
  first_byte: 1s
  request:
    standard: {chunk_interval: 1s}
    streaming: {totl: 1s}
    model_overrides:
      m: {streamin: {}, streaming: {first_bite: 1s}}
  limits: {max_total: 1s}
""") == [
        "timeouts.limits.max_total: unknown key",
        "timeouts.request.standard.chunk_interval: unknown key",
        "timeouts.request.streaming.totl: unknown key",
        "timeouts.request.model_overrides.m.streaming.first_bite: unknown key",
        "timeouts.request.model_overrides.m.streamin: unknown key",
        "timeouts.first_byte: unknown key",
    ]


# --- retry ---------------------------------------------------------------------

def test_retry_max_attempts_between_1_and_10():
    assert errors_of(MINIMAL + "retry: {max_attempts: 0}\n") == ["retry.max_attempts: must be at least 1, got 0"]
    assert errors_of(MINIMAL + "retry: {max_attempts: 11}\n") == ["retry.max_attempts: must be at most 10, got 11"]


def test_retry_initial_delay_may_be_zero():
    assert snapshot(MINIMAL + "retry: {initial_delay: 0}\n").retry.initial_delay == 0
    assert errors_of(MINIMAL + "retry: {initial_delay: soon}\n") == [
        "retry.initial_delay: must be a duration like 10s, 500ms or 1m30s, got 'soon'"]


def test_retry_max_delay_below_initial_delay_is_error_at_max_delay():
    assert errors_of(MINIMAL + "retry: {initial_delay: 2s, max_delay: 1500ms}\n") == [
        "retry.max_delay: must be at least initial_delay (2s), got 1.5s"]
    assert errors_of(MINIMAL + "retry: {max_delay: 50ms}\n") == [
        "retry.max_delay: must be at least initial_delay (0.1s), got 0.05s"]
    assert snapshot(MINIMAL + "retry: {initial_delay: 1s, max_delay: 1s}\n").retry.max_delay == 1


def test_retry_backoff_multiplier_between_1_and_10():
    assert errors_of(MINIMAL + "retry: {backoff_multiplier: 0.9}\n") == [
        "retry.backoff_multiplier: must be at least 1, got 0.9"]
    assert errors_of(MINIMAL + "retry: {backoff_multiplier: 10.5}\n") == [
        "retry.backoff_multiplier: must be at most 10, got 10.5"]


def test_retry_jitter_is_boolean():
    assert errors_of(MINIMAL + "retry: {jitter: full}\n") == ["retry.jitter: must be true or false, got string"]


def test_retryable_status_codes_are_integers_400_to_599():
    assert errors_of(MINIMAL + "retry: {retryable_status_codes: [429, 399]}\n") == [
        "retry.retryable_status_codes: item [1] must be at least 400, got 399"]
    assert errors_of(MINIMAL + "retry: {retryable_status_codes: [600]}\n") == [
        "retry.retryable_status_codes: item [0] must be at most 599, got 600"]
    assert errors_of(MINIMAL + "retry: {retryable_status_codes: ['503']}\n") == [
        "retry.retryable_status_codes: item [0] must be an integer, got string"]
    assert errors_of(MINIMAL + "retry: {retryable_status_codes: 503}\n") == [
        "retry.retryable_status_codes: must be a list of integers, got integer"]


def test_retryable_errors_only_connection_error_and_timeout_error():
    assert errors_of(MINIMAL + "retry: {retryable_errors: [ConnectionError, OSError]}\n") == [
        "retry.retryable_errors: item [1] must be one of ConnectionError, TimeoutError, got 'OSError'"]


def test_retry_override_has_retry_shape_plus_timeout_and_does_not_inherit():
    snap = snapshot(MINIMAL + "    retry_override: {max_attempts: 5, timeout: 2m}\n"
                    "retry: {max_attempts: 2, jitter: false}\n")
    ro = snap.backends[0].retry_override
    assert (ro.max_attempts, ro.timeout, ro.jitter, ro.initial_delay) == (5, 120, True, 0.1)
    assert snap.retry.timeout is None
    assert snapshot(MINIMAL + "    retry_override:\n").backends[0].retry_override is None


def test_retry_override_validated_at_backend_path():
    assert errors_of(MINIMAL + "    retry_override: {timeout: 0s, max_attempts: 20, initial_delay: 5s, "
                               "max_delay: 1s, retries: 3}\n") == [
        "backends[0].retry_override.max_attempts: must be at most 10, got 20",
        "backends[0].retry_override.timeout: must be greater than zero",
        "backends[0].retry_override.max_delay: must be at least initial_delay (5s), got 1s",
        "backends[0].retry_override.retries: unknown key",
    ]


def test_timeout_only_allowed_in_retry_override():
    assert errors_of(MINIMAL + "retry: {timeout: 10s}\n") == ["retry.timeout: unknown key"]


def test_replay_accepts_exactly_enabled_or_disabled():
    assert snapshot(MINIMAL + "    replay: disabled\n").backends[0].replay is False
    assert snapshot(MINIMAL + "    replay: enabled\n").backends[0].replay is True
    assert errors_of(MINIMAL + "    replay: off\n") == [
        "backends[0].replay: must be one of enabled, disabled, got boolean"]
    assert errors_of(MINIMAL + "    replay: Disabled\n") == [
        "backends[0].replay: must be one of enabled, disabled, got 'Disabled'"]


# --- fallback chains: model names ------------------------------------------------

def test_chain_name_bad_character_names_character_and_byte_offset():
    assert errors_of(MINIMAL + "fallback: {fallback_chains: {'gpt 4o': [gpt-4o-mini]}}\n") == [
        "fallback.fallback_chains.gpt 4o: model name has ' ' (U+0020) at byte offset 3; "
        "only letters, digits and - _ . / : are allowed (got 'gpt 4o')"]


def test_chain_name_byte_offset_counts_utf8_bytes():
    # Four Cyrillic letters of two bytes each come before the '!'.
    assert errors_of(MINIMAL + "fallback: {fallback_chains: {m: ['лама!']}}\n") == [
        "fallback.fallback_chains.m[0]: model name has '!' (U+0021) at byte offset 8; "
        "only letters, digits and - _ . / : are allowed (got 'лама!')"]


def test_chain_name_allows_unicode_letters_digits_and_path_punctuation():
    snap = snapshot(MINIMAL + """
fallback:
  fallback_chains:
    ggml-org/gpt-oss-20b-MXFP4:
      - meta-llama/Llama-3.1-8B-Instruct
      - hf.co/org/repo:Q4_K_M
      - 通义千问2
""")
    assert snap.fallback.fallback_chains == {"ggml-org/gpt-oss-20b-MXFP4": (
        "meta-llama/Llama-3.1-8B-Instruct", "hf.co/org/repo:Q4_K_M", "通义千问2")}


def test_chain_name_escapes_control_characters():
    assert errors_of(MINIMAL + 'fallback: {fallback_chains: {m: ["a\\tb\\u200b\'"]}}\n') == [
        "fallback.fallback_chains.m[0]: model name has '\\t' (U+0009) at byte offset 1; "
        "only letters, digits and - _ . / : are allowed (got 'a\\tb\\u200b\\'')"]


def test_chain_name_shown_cut_to_128_characters():
    name = "x" * 200 + " "
    errors = errors_of(MINIMAL + f"fallback: {{fallback_chains: {{m: ['{name}']}}}}\n")
    assert errors == [
        "fallback.fallback_chains.m[0]: model name has ' ' (U+0020) at byte offset 200; "
        f"only letters, digits and - _ . / : are allowed (got '{'x' * 128}'...)"]


def test_chain_name_empty_is_error():
    assert errors_of(MINIMAL + "fallback: {fallback_chains: {m: [a, '']}}\n") == [
        "fallback.fallback_chains.m[1]: model name must not be empty"]


def test_chain_name_longer_than_128_bytes_is_error():
    assert snapshot(MINIMAL + f"fallback: {{fallback_chains: {{m: [{'é' * 64}]}}}}\n")  # 128 bytes: fine
    assert errors_of(MINIMAL + f"fallback: {{fallback_chains: {{m: [{'é' * 65}]}}}}\n") == [
        "fallback.fallback_chains.m[0]: model name is 130 bytes long in UTF-8; at most 128 are allowed "
        f"(got '{'é' * 65}')"]


def test_chain_name_must_be_string():
    assert errors_of(MINIMAL + "fallback: {fallback_chains: {m: [a, 4]}}\n") == [
        "fallback.fallback_chains.m[1]: must be a string, got integer"]


def test_model_settings_keys_follow_model_name_rules():
    assert errors_of(MINIMAL + "fallback: {model_settings: {'m*': {fallback_enabled: no}, "
                               "m: {notify_on_fallback: 1, notify: true}}}\n") == [
        "fallback.model_settings.m*: model name has '*' (U+002A) at byte offset 1; "
        "only letters, digits and - _ . / : are allowed (got 'm*')",
        "fallback.model_settings.m.notify_on_fallback: must be true or false, got integer",
        "fallback.model_settings.m.notify: unknown key",
    ]


# --- fallback chains: structure -------------------------------------------------

def test_chain_entry_error_path_has_list_index():
    assert errors_of(MINIMAL + "fallback: {fallback_chains: {gpt-4o: [gpt-4o-mini, 'claude sonnet']}}\n") == [
        "fallback.fallback_chains.gpt-4o[1]: model name has ' ' (U+0020) at byte offset 6; "
        "only letters, digits and - _ . / : are allowed (got 'claude sonnet')"]


def test_chain_may_not_contain_its_own_key():
    assert errors_of(MINIMAL + "fallback: {fallback_chains: {gpt-4o: [gpt-4o-mini, gpt-4o]}}\n") == [
        "fallback.fallback_chains.gpt-4o[1]: names the chain's own model 'gpt-4o'"]


def test_chain_may_not_repeat_a_model():
    assert errors_of(MINIMAL + "fallback: {fallback_chains: {gpt-4o: [a, b, a]}}\n") == [
        "fallback.fallback_chains.gpt-4o[2]: duplicate model 'a' (also fallback.fallback_chains.gpt-4o[0])"]


def test_chain_must_be_non_empty_list():
    assert errors_of(MINIMAL + "fallback: {fallback_chains: {a: [], b: , c: x}}\n") == [
        "fallback.fallback_chains.a: must list at least one model",
        "fallback.fallback_chains.b: must list at least one model",
        "fallback.fallback_chains.c: must be a list of model names, got string",
    ]


def test_fallback_chains_must_be_mapping():
    assert errors_of(MINIMAL + "fallback: {fallback_chains: [a, b]}\n") == [
        "fallback.fallback_chains: must be a mapping, got list"]


# --- fallback policy -------------------------------------------------------------

def test_fallback_policy_ranges():
    assert errors_of(MINIMAL + """
fallback:
  fallback_policy:
    max_fallback_attempts: 11
    fallback_timeout_multiplier: 0.5
    max_concurrent_dials_per_backend: 10001
    trigger_conditions: {error_codes: [200], timeout: yes please}
  empty_reply_retry: {max_extra_hops: 0}
""") == [
        "fallback.fallback_policy.trigger_conditions.error_codes: item [0] must be at least 400, got 200",
        "fallback.fallback_policy.trigger_conditions.timeout: must be true or false, got string",
        "fallback.fallback_policy.max_fallback_attempts: must be at most 10, got 11",
        "fallback.fallback_policy.fallback_timeout_multiplier: must be at least 1, got 0.5",
        "fallback.fallback_policy.max_concurrent_dials_per_backend: must be at most 10000, got 10001",
        "fallback.empty_reply_retry.max_extra_hops: must be at least 1, got 0",
    ]
    assert errors_of(MINIMAL + "fallback: {empty_reply_retry: {max_extra_hops: 6}, "
                               "fallback_policy: {max_fallback_attempts: -1}}\n") == [
        "fallback.fallback_policy.max_fallback_attempts: must be at least 0, got -1",
        "fallback.empty_reply_retry.max_extra_hops: must be at most 5, got 6",
    ]


def test_max_concurrent_dials_zero_means_unlimited():
    snap = snapshot(MINIMAL + "fallback: {fallback_policy: {max_concurrent_dials_per_backend: 0}}\n")
    assert snap.fallback.fallback_policy.max_concurrent_dials_per_backend == 0


def test_unknown_fallback_keys_are_errors():
    assert errors_of(MINIMAL + """
fallback:
  chains: {}
  fallback_policy: {trigger_conditions: {rate_limited: true}, max_attempts: 1}
  empty_reply_retry: {hops: 1}
""") == [
        "fallback.fallback_policy.trigger_conditions.rate_limited: unknown key",
        "fallback.fallback_policy.max_attempts: unknown key",
        "fallback.empty_reply_retry.hops: unknown key",
        "fallback.chains: unknown key",
    ]


# --- fallback warnings -----------------------------------------------------------

def test_chains_while_fallback_disabled_warns():
    assert warnings_of(MINIMAL + "fallback: {fallback_chains: {m: [n]}}\n") == (
        "fallback.fallback_chains: chains are ignored while fallback.enabled is false",)
    assert warnings_of(MINIMAL + "fallback: {enabled: true, fallback_chains: {m: [n]}}\n") == ()


def test_chain_model_no_backend_lists_warns():
    assert warnings_of(EXACT_ONLY + "fallback: {enabled: true, fallback_chains: "
                                    "{gpt-4o: [gpt-4o-mini, o3], other: [gpt-4o]}}\n") == (
        "fallback.fallback_chains.gpt-4o[1]: no backend lists model 'o3': "
        "this step of the chain never finds a backend",)


def test_chain_model_warning_skipped_with_discovery_or_globs():
    chains = "fallback: {enabled: true, fallback_chains: {gpt-4o: [o3]}}\n"
    assert warnings_of(MINIMAL + chains) == ()  # discovery is on by default
    with_glob = EXACT_ONLY.replace("models: [gpt-4o, gpt-4o-mini]", "models: [gpt-4o, 'o*']")
    assert warnings_of(with_glob + chains) == ()


# --- streaming ---------------------------------------------------------------------

def test_mid_stream_fallback_ranges():
    assert errors_of(MINIMAL + "streaming: {mid_stream_fallback: {min_accumulated_tokens: 100001, "
                               "max_fallback_attempts: 11, enabled: 1, same_model_first: maybe}}\n") == [
        "streaming.mid_stream_fallback.enabled: must be true or false, got integer",
        "streaming.mid_stream_fallback.min_accumulated_tokens: must be at most 100000, got 100001",
        "streaming.mid_stream_fallback.max_fallback_attempts: must be at most 10, got 11",
        "streaming.mid_stream_fallback.same_model_first: must be true or false, got string",
    ]
    assert errors_of(MINIMAL + "streaming: {mid_stream_fallback: {min_accumulated_tokens: -1, "
                               "max_fallback_attempts: -1}}\n") == [
        "streaming.mid_stream_fallback.min_accumulated_tokens: must be at least 0, got -1",
        "streaming.mid_stream_fallback.max_fallback_attempts: must be at least 0, got -1",
    ]


def test_continuation_prompt_non_empty_and_at_most_4096_characters():
    assert errors_of(MINIMAL + "streaming: {mid_stream_fallback: {continuation_prompt: ''}}\n") == [
        "streaming.mid_stream_fallback.continuation_prompt: must not be empty"]
    assert errors_of(MINIMAL + "streaming: {mid_stream_fallback: {continuation_prompt: '  '}}\n") == [
        "streaming.mid_stream_fallback.continuation_prompt: must not be only whitespace"]
    assert errors_of(MINIMAL + f"streaming: {{mid_stream_fallback: {{continuation_prompt: {'a' * 4097}}}}}\n") == [
        "streaming.mid_stream_fallback.continuation_prompt: must be at most 4096 characters, got 4097"]
    snap = snapshot(MINIMAL + f"streaming: {{mid_stream_fallback: {{continuation_prompt: {'a' * 4096}}}}}\n")
    assert len(snap.streaming.mid_stream_fallback.continuation_prompt) == 4096


def test_continuation_style_is_auto_or_prompt():
    assert errors_of(MINIMAL + "streaming: {mid_stream_fallback: {continuation_style: prefill}}\n") == [
        "streaming.mid_stream_fallback.continuation_style: must be one of auto, prompt, got 'prefill'"]


def test_unknown_streaming_keys_are_errors():
    assert errors_of(MINIMAL + "streaming: {mid_stream: {}, mid_stream_fallback: {mode: auto}}\n") == [
        "streaming.mid_stream_fallback.mode: unknown key",
        "streaming.mid_stream: unknown key",
    ]


# --- validate command ------------------------------------------------------------

def test_config_validate_prints_resilience_errors_and_warnings(tmp_path, capsys):
    from switchyard.protocol.serving.cli import main

    path = tmp_path / "c.yaml"
    path.write_text(MINIMAL + "fallback: {fallback_chains: {m: [n]}}\n")
    assert main(["config", "validate", str(path)]) == 0
    assert "warning: fallback.fallback_chains: chains are ignored while fallback.enabled is false" \
        in capsys.readouterr().out
    path.write_text(MINIMAL + "timeouts: {request: {streaming: {chunk_interval: 61s}}}\n")
    assert main(["config", "validate", str(path)]) == 1
    assert "error: timeouts.request.streaming.chunk_interval: is too large, maximum is 60s" \
        in capsys.readouterr().out
