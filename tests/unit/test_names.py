"""Model-name resolution (config/names.py) against the advanced-configuration
spec: metadata priority and alias resolution, date suffixes, quantization /
format suffix peel, HuggingFace prefix strip, wildcard aliases, alias classes.

Each table is named after the spec rule it pins; every resolution example the
spec gives is in one of them, written as the spec writes it.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.config.names import (
    MAX_NAME_LENGTH,
    MAX_PEELS,
    Catalogue,
    Entry,
    Stage,
    explain,
    glob_match,
    hf_residue,
    peel_token,
    resolve,
)

S = Stage

# The catalogue the spec's examples talk about, with the aliases it shows.
SPEC = Catalogue.of(
    ("gpt-5.6-sol", ["gpt-5.6", "gpt-5.6-*"]),
    ("claude-opus-4-5-20251101", ["claude-opus-4-5", "claude-opus-*"]),
    ("llama-3-70b", ["llama-3-70b-instruct", "llama-3-70b-chat", "llama-3-70b-q4", "llama-3-70b-q8"]),
    ("qwen3", ["qwen3-32b-i1", "qwen3-23b-i4", "qwen3-16b-q8", "qwen3-*"]),
    ("gemma-3-4b-qat", ["gemma-3-4b-it-qat"]),
    "gemma-3-12b-qat",
    "gemma-3-12b",
    "ministral-3-14b",
    "qwen3.5-4b",
    ("qwen3.6-35b-a3b", ["qwen3.6-35b-a3b-instruct", "Qwen/Qwen3.6-35B-A3B"]),
    ("smoothie-qwen3", ["smoothie-qwen3-32b-i1"]),
    ("bge-m3", ["BAAI/bge-m3"]),
)


def check(catalogue, name, entry_id, stage):
    got = resolve(name, catalogue)
    if entry_id is None:
        assert got is None, got
    else:
        assert got is not None, explain(name, catalogue).steps
        assert (got.entry_id, got.stage) == (entry_id, stage), got


# -- Metadata priority and alias resolution (stages in order) --------------

@pytest.mark.parametrize("name, entry_id, stage", [
    ("gpt-5.6-sol", "gpt-5.6-sol", S.EXACT_ID),
    ("gpt-5.6", "gpt-5.6-sol", S.EXACT_ALIAS),
    ("claude-opus-4-5-20251130", "claude-opus-4-5-20251101", S.DATE_SUFFIX),
    ("gemma-3-4b-it-qat-4bit", "gemma-3-4b-qat", S.PEEL),
    ("Ministral-3-14B-Instruct-2512", "ministral-3-14b", S.DATE_AND_PEEL),
    ("unsloth/Qwen3.6-35B-A3B-GGUF", "qwen3.6-35b-a3b", S.HF_PREFIX),
    ("claude-opus-test", "claude-opus-4-5-20251101", S.WILDCARD),
    ("openai/gpt-5.6-mini", "gpt-5.6-sol", S.NAMESPACE_BASE),
    ("mistral-large", None, None),
])
def test_priority_chain_one_example_per_stage(name, entry_id, stage):
    check(SPEC, name, entry_id, stage)


def test_stage_enum_follows_spec_order():
    assert [s.name for s in sorted(Stage, key=lambda s: s.value)] == [
        "EXACT_ID", "EXACT_ALIAS", "DATE_SUFFIX", "PEEL", "DATE_AND_PEEL",
        "HF_PREFIX", "WILDCARD", "NAMESPACE_BASE"]


@pytest.mark.parametrize("catalogue, name, entry_id, stage", [
    # An id beats another entry's alias of the same spelling.
    (Catalogue.of(("a", ["b"]), "b"), "b", "b", S.EXACT_ID),
    # An exact alias beats a date match.
    (Catalogue.of("m-20250101", ("other", ["m-20250202"])), "m-20250202", "other", S.EXACT_ALIAS),
    # A date match beats a peel at the same name.
    (Catalogue.of("m-20250101", "m"), "m-20250202", "m", S.DATE_SUFFIX),
    # An exact alias beats a wildcard that also matches.
    (Catalogue.of(("wild", ["claude-*"]), ("tame", ["claude-x"])), "claude-x", "tame", S.EXACT_ALIAS),
    # Earlier entries win ties (backend model_configs listed first).
    (Catalogue.of(("first", ["shared"]), ("second", ["shared"])), "shared", "first", S.EXACT_ALIAS),
    (Catalogue.of("dup", ("dup", ["x"])), "dup", "dup", S.EXACT_ID),
])
def test_priority_rule_earlier_stage_wins(catalogue, name, entry_id, stage):
    check(catalogue, name, entry_id, stage)


# -- Namespace-aware matching ----------------------------------------------

@pytest.mark.parametrize("name", ["custom/gpt-5.6-sol", "openai/gpt-5.6-sol", "optimized/gpt-5.6-sol"])
def test_namespace_aware_matching_spec_example(name):
    # All three backend spellings share the gpt-5.6-sol metadata.
    check(SPEC, name, "gpt-5.6-sol", S.HF_PREFIX)


def test_namespace_base_falls_back_to_wildcards_on_the_base_name():
    check(SPEC, "custom/claude-opus-test", "claude-opus-4-5-20251101", S.NAMESPACE_BASE)
    check(SPEC, "a/b/c/claude-opus-test", None, None)   # too many segments: no base either


# -- Automatic date suffix handling ----------------------------------------

DATED = Catalogue.of(
    "claude-opus-4-5-20251101", "gpt-4o", "o1-mini", "model", "claude-3-5-sonnet-20241022")


@pytest.mark.parametrize("name, entry_id", [
    ("claude-opus-4-5-20251130", "claude-opus-4-5-20251101"),   # -YYYYMMDD
    ("claude-opus-4-5-20251215", "claude-opus-4-5-20251101"),   # the spec's walk-through
    ("gpt-4o-2024-08-06", "gpt-4o"),                            # -YYYY-MM-DD
    ("o1-mini-2409", "o1-mini"),                                # -YYMM
    ("model@20251130", "model"),                                # @YYYYMMDD
    ("claude-3-5-sonnet-20241201", "claude-3-5-sonnet-20241022"),  # alias-classes example
    ("Claude-Opus-4-5-20251130", "claude-opus-4-5-20251101"),   # case-insensitive
])
def test_date_suffix_patterns(name, entry_id):
    check(DATED, name, entry_id, S.DATE_SUFFIX)


@pytest.mark.parametrize("name", [
    "claude-opus-4-5",        # an undated name does not reach a dated entry
    "gpt-4o-20241306",        # month 13
    "gpt-4o-20240832",        # day 32
    "gpt-4o-19990806",        # year outside 2000-2099
    "o1-mini-2413",           # -YYMM with month 13
    "gpt-4o-2024-8-6",        # unpadded
    "gpt-4o-٢٠٢٤٠٨٠٦",        # non-ASCII digits
    "-20251130",              # nothing left in front
    "@20251130",
])
def test_date_suffix_rejects_non_dates(name):
    check(DATED, name, None, None)


# -- Quantization / format suffix handling: token categories ---------------

@pytest.mark.parametrize("suffix, category", [
    *[(t, "BIT_WIDTH") for t in ["2bit", "3bit", "4bit", "5bit", "6bit", "8bit", "16bit"]],
    *[(t, "GGUF_QUANT") for t in ["Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K", "Q8_0", "Q2_K",
                                   "IQ2_XS", "IQ3_XXS", "IQ4_XS", "F16", "F32", "BF16"]],
    *[(t, "FP_FORMAT") for t in ["FP4", "FP8", "FP16", "FP32", "NVFP4", "MXFP4", "MXFP8"]],
    *[(t, "INT_FORMAT") for t in ["INT2", "INT4", "INT8"]],
    *[(t, "WEIGHT_ACTIVATION") for t in ["W4A16", "W8A8", "W4A8", "quantized.w4a16"]],
    *[(t, "LIBRARY") for t in ["AWQ", "GPTQ", "BNB", "HQQ", "EXL2", "EXL3", "MLX"]],
    *[(t, "IMATRIX") for t in [f"i{n}" for n in range(1, 9)] + [f"q{n}" for n in range(2, 9)]],
    *[(t, "UNSLOTH") for t in ["UD-Q4_K_XL", "UD-IQ2_XXS", "unsloth"]],
    *[(t, "CONTAINER") for t in ["GGUF", "GGML", "SAFETENSORS", "ONNX"]],
    *[(t, "FLAVOR") for t in ["it", "instruct", "chat", "base", "thinking", "qat"]],
    *[(t, "HARDWARE") for t in ["rngd", "warboy", "atom", "atommax", "rebel"]],
])
def test_token_categories_each_token_peels(suffix, category):
    from switchyard.config.names import fold
    assert peel_token(fold(f"base-1-{suffix}")) == ("base-1", category)
    check(Catalogue.of("base-1"), f"base-1-{suffix}", "base-1", S.PEEL)


@pytest.mark.parametrize("name, peeled", [
    ("m-fp8-dynamic", "m-fp8"),
    ("m-int4-static", "m-int4"),
    ("m-w4a16-block", "m-w4a16"),
    ("m-dynamic", None),          # scaling granularity only after FP / INT / W-A
    ("m-qat-block", None),
])
def test_token_categories_scaling_granularity_only_after_formats(peeled, name):
    got = peel_token(name)
    assert (got[0] if got else None) == peeled


@pytest.mark.parametrize("name", [
    "m-abliterated", "m-heretic", "m-uncensored", "m-distilled", "m-reap-20b",
    "m-dflash", "m-dspark", "m-speculator.eagle3", "m-mtp", "m-assistant", "m-nf4",
])
def test_token_categories_derived_models_are_not_peeled(name):
    assert peel_token(name) is None
    check(Catalogue.of("m"), name, None, None)


# -- Parameter-count suffixes are preserved --------------------------------

@pytest.mark.parametrize("token", ["32b", "70b", "8b", "4b", "a3b", "a22b", "0.6b", "1.7b", "e4b"])
def test_parameter_count_suffix_is_kept(token):
    assert peel_token(f"qwen3-{token}") is None
    check(Catalogue.of("qwen3"), f"qwen3-{token}", None, None)


@pytest.mark.parametrize("token", ["4bit", "8bit", "16bit"])
def test_parameter_count_bit_suffix_is_removed(token):
    check(Catalogue.of("qwen3-32b"), f"qwen3-32b-{token}", "qwen3-32b", S.PEEL)


def test_parameter_count_ends_the_chain_so_qwen3_32b_i1_needs_its_alias():
    bare = Catalogue.of("qwen3")
    check(bare, "qwen3-32b-i1", None, None)
    assert explain("qwen3-32b-i1", bare).steps == ("qwen3-32b-i1", "qwen3-32b")
    check(SPEC, "qwen3-32b-i1", "qwen3", S.EXACT_ALIAS)
    check(Catalogue.of("qwen3", "qwen3-32b"), "qwen3-32b", "qwen3-32b", S.EXACT_ID)


# -- Hierarchical peel -----------------------------------------------------

def test_hierarchical_peel_spec_example_alias_wins_mid_chain():
    got = resolve("gemma-3-4b-it-qat-4bit", SPEC)
    assert (got.entry_id, got.stage, got.matched) == ("gemma-3-4b-qat", S.PEEL, "gemma-3-4b-it-qat")
    assert got.steps == ("gemma-3-4b-it-qat-4bit", "gemma-3-4b-it-qat")


def test_hierarchical_peel_spec_example_date_then_peel():
    got = resolve("Ministral-3-14B-Instruct-2512", SPEC)
    assert (got.entry_id, got.stage) == ("ministral-3-14b", S.DATE_AND_PEEL)
    assert got.steps[-3:] == ("ministral-3-14b-instruct-2512", "ministral-3-14b-instruct", "ministral-3-14b")


@pytest.mark.parametrize("name, entry_id, stage", [
    ("claude-opus-4-5-20251215-4bit", "claude-opus-4-5-20251101", S.DATE_AND_PEEL),  # peel, then date
    ("gpt-4o-2024-08-06-awq", "gpt-4o", S.DATE_AND_PEEL),
    ("Qwen3-8B-FP8-dynamic", None, None),                     # chain ends at -8b
    ("llama-3-70b-instruct-GPTQ-int4", "llama-3-70b", S.PEEL),  # alias reached after two peels
])
def test_hierarchical_peel_combinations(name, entry_id, stage):
    cat = Catalogue.of(*SPEC.entries, "gpt-4o")
    check(cat, name, entry_id, stage)


# -- Priority note: peel runs after exact id and alias ---------------------

def test_peel_priority_canonical_id_ending_in_a_token_wins_first():
    check(SPEC, "gemma-3-12b-qat", "gemma-3-12b-qat", S.EXACT_ID)
    check(SPEC, "llama-3-70b-instruct", "llama-3-70b", S.EXACT_ALIAS)


# -- Suffix order ambiguity ------------------------------------------------

def test_suffix_order_peel_sequences_match_the_spec():
    cat = Catalogue.of("nothing")
    assert explain("gemma-3-12b-qat-4bit", cat).steps == (
        "gemma-3-12b-qat-4bit", "gemma-3-12b-qat", "gemma-3-12b")
    assert explain("gemma-3-12b-4bit-qat", cat).steps == (
        "gemma-3-12b-4bit-qat", "gemma-3-12b-4bit", "gemma-3-12b")


def test_suffix_order_first_match_at_each_depth_wins():
    check(SPEC, "gemma-3-12b-qat-4bit", "gemma-3-12b-qat", S.PEEL)
    check(SPEC, "gemma-3-12b-4bit-qat", "gemma-3-12b", S.PEEL)
    # Registering both orders explicitly keeps the QAT variants together.
    explicit = Catalogue.of(("gemma-3-12b-qat", ["gemma-3-12b-4bit-qat"]), "gemma-3-12b")
    check(explicit, "gemma-3-12b-4bit-qat", "gemma-3-12b-qat", S.EXACT_ALIAS)


# -- Length limits ---------------------------------------------------------

def test_length_limit_long_names_still_match_exactly_but_are_not_normalized():
    long_id = "m" * (MAX_NAME_LENGTH + 1)
    cat = Catalogue.of(long_id, ("short", [long_id + "-alias"]), ("wild", ["m*"]))
    check(cat, long_id, long_id, S.EXACT_ID)
    check(cat, long_id + "-alias", "short", S.EXACT_ALIAS)
    check(cat, long_id + "-4bit", None, None)          # no peel
    check(cat, "m" * (MAX_NAME_LENGTH + 5), None, None)  # no wildcard either
    at_limit = "m" * (MAX_NAME_LENGTH - 5) + "-4bit"
    assert len(at_limit) == MAX_NAME_LENGTH
    check(Catalogue.of("m" * (MAX_NAME_LENGTH - 5)), at_limit, "m" * (MAX_NAME_LENGTH - 5), S.PEEL)


def test_length_limit_at_most_eight_removals():
    cat = Catalogue.of("base")
    eight = "base" + "-it" * MAX_PEELS
    check(cat, eight, "base", S.PEEL)
    check(cat, eight + "-it", None, None)
    # A date strip counts as one removal.
    check(cat, "base" + "-it" * (MAX_PEELS - 1) + "-20250101", "base", S.DATE_AND_PEEL)
    check(cat, "base" + "-it" * MAX_PEELS + "-20250101", None, None)


# -- Case-insensitivity ----------------------------------------------------

@pytest.mark.parametrize("name", ["Qwen3.5-4B-4bit", "QWEN3.5-4B-4BIT", "qwen3.5-4b-4bit"])
def test_case_insensitive_peel_spec_example(name):
    check(SPEC, name, "qwen3.5-4b", S.PEEL)


def test_case_sensitive_exact_stages_keep_hf_style_aliases():
    check(SPEC, "BAAI/bge-m3", "bge-m3", S.EXACT_ALIAS)
    # Other casings only match through the (case-insensitive) normalization stages.
    check(SPEC, "baai/bge-m3", "bge-m3", S.PEEL)
    check(Catalogue.of("Model-X", "model-x"), "model-x", "model-x", S.EXACT_ID)
    check(Catalogue.of("Model-X"), "MODEL-X", "Model-X", S.PEEL)


# -- Wildcard pattern matching ---------------------------------------------

@pytest.mark.parametrize("pattern, name, matches", [
    ("claude-*", "claude-opus", True),
    ("claude-*", "claude-sonnet", True),
    ("*-preview", "gemini-3.1-pro-preview", True),
    ("*-preview", "o1-preview", True),
    ("gpt-*-turbo", "gpt-4-turbo", True),
    ("gpt-*-turbo", "gpt-3.5-turbo", True),
    ("gpt-*-turbo", "gpt-4-turbo-x", False),
    ("claude-*", "Claude-opus", False),         # case-sensitive like exact aliases
    ("a?c", "abc", False),                      # only * is special
    ("a[b]c", "abc", False),
    ("*a*b*c*", "xxaxxbxxcxx", True),
    ("*", "", True),
])
def test_wildcard_glob_forms(pattern, name, matches):
    assert glob_match(pattern, name) is matches


def test_wildcard_spec_config_example():
    check(SPEC, "claude-opus-4-5-20251130", "claude-opus-4-5-20251101", S.DATE_SUFFIX)
    check(SPEC, "claude-opus-test", "claude-opus-4-5-20251101", S.WILDCARD)
    check(SPEC, "gpt-5.6-mini", "gpt-5.6-sol", S.WILDCARD)
    check(SPEC, "qwen3-70b", "qwen3", S.WILDCARD)
    for alias in ["qwen3-32b-i1", "qwen3-23b-i4", "qwen3-16b-q8"]:
        check(SPEC, alias, "qwen3", S.EXACT_ALIAS)


def test_wildcard_exact_alias_beats_wildcard_and_most_specific_pattern_wins():
    cat = Catalogue.of(("broad", ["gpt-*"]), ("narrow", ["gpt-5.6-*"]), ("exact", ["gpt-5.6-x"]))
    check(cat, "gpt-5.6-x", "exact", S.EXACT_ALIAS)
    check(cat, "gpt-5.6-y", "narrow", S.WILDCARD)
    check(cat, "gpt-4", "broad", S.WILDCARD)
    tie = Catalogue.of(("one", ["a-*"]), ("two", ["*-b"]))
    check(tie, "a-b", "one", S.WILDCARD)


def test_wildcard_runs_after_normalization():
    # -chat peels to the id before the gpt-5.6-* wildcard is considered.
    check(SPEC, "gpt-5.6-sol-chat", "gpt-5.6-sol", S.PEEL)


def test_wildcard_alias_is_not_an_exact_alias():
    cat = Catalogue.of(("w", ["x-*"]))
    got = resolve("x-*", cat)
    assert (got.stage, got.matched) == (S.WILDCARD, "x-*")


# -- HuggingFace repo prefix strip (stage 5) -------------------------------

@pytest.mark.parametrize("name, residue", [
    ("unsloth/Qwen3.6-35B-A3B-GGUF", "Qwen3.6-35B-A3B-GGUF"),
    ("org/team/repo", "repo"),
    ("plain-name", None),
    ("a/b/c/d/model", None),       # more than 3 segments
    ("/repo", None),
    ("vendor/", None),
    ("vendor//repo", None),
    ("vendor /repo", None),
    ("vendor/re\tpo", None),
])
def test_hf_prefix_segment_validation(name, residue):
    assert hf_residue(name) == residue


@pytest.mark.parametrize("name, entry_id", [
    ("unsloth/Qwen3.6-35B-A3B-GGUF", "qwen3.6-35b-a3b"),      # strip + peel + case fold
    ("org/team/qwen3.6-35b-a3b", "qwen3.6-35b-a3b"),
    ("vendor/claude-opus-4-5-20251130", "claude-opus-4-5-20251101"),  # strip + date
    ("a/b/c/d/qwen3.6-35b-a3b", None),
    ("vendor//qwen3.6-35b-a3b", None),
    ("vendor /qwen3.6-35b-a3b", None),
])
def test_hf_prefix_strip_combines_with_suffix_peel(name, entry_id):
    check(SPEC, name, entry_id, S.HF_PREFIX if entry_id else None)


def test_hf_prefix_strip_happens_exactly_once():
    cat = Catalogue.of("repo")
    check(cat, "org/team/repo", "repo", S.HF_PREFIX)
    # Four segments are rejected outright rather than stripped twice.
    check(cat, "a/b/c/repo", None, None)
    # The re-entry sees the residue once: two stage-1..5 passes in the trace.
    steps = explain("org/team/repo-4bit", cat).steps
    assert steps == ("org/team/repo-4bit", "org/team/repo", "repo-4bit", "repo")


def test_hf_prefix_registered_alias_wins():
    check(SPEC, "Qwen/Qwen3.6-35B-A3B", "qwen3.6-35b-a3b", S.EXACT_ALIAS)
    special = Catalogue.of("qwen3.6-35b-a3b", ("vendor-build", ["unsloth/Qwen3.6-35B-A3B-GGUF"]))
    check(special, "unsloth/Qwen3.6-35B-A3B-GGUF", "vendor-build", S.EXACT_ALIAS)


def test_hf_prefix_out_of_scope_hyphenated_vendor_prefix():
    # Only the slash prefix goes; "smoothie-" stays, so this is not qwen3.
    check(Catalogue.of(("qwen3", ["qwen3-32b-i1"])), "smoothie-qwen/smoothie-qwen3-32b-i1", None, None)
    check(SPEC, "smoothie-qwen/smoothie-qwen3-32b-i1", "smoothie-qwen3", S.HF_PREFIX)


def test_hf_prefix_security_boundary_work_is_bounded():
    cat = Catalogue.of("m")
    name = "/".join(["v"] * 100) + "/m"
    assert len(name) <= 256
    trace = explain(name, cat)
    assert trace.resolution is None and len(trace.steps) <= 3


# -- Alias classes ---------------------------------------------------------

def test_alias_class_peel_coverable():
    bare = Catalogue.of("qwen3.6-35b-a3b")
    check(bare, "qwen3.6-35b-a3b-instruct", "qwen3.6-35b-a3b", S.PEEL)
    check(SPEC, "qwen3.6-35b-a3b-instruct", "qwen3.6-35b-a3b", S.EXACT_ALIAS)


def test_alias_class_vendor_prefix():
    bare = Catalogue.of("qwen3.6-35b-a3b")
    got = resolve("Qwen/Qwen3.6-35B-A3B", bare)
    assert (got.entry_id, got.stage) == ("qwen3.6-35b-a3b", S.HF_PREFIX)
    assert got.steps[-2:] == ("Qwen3.6-35B-A3B", "qwen3.6-35b-a3b")


def test_alias_class_intentional_override():
    check(SPEC, "smoothie-qwen3-32b-i1", "smoothie-qwen3", S.EXACT_ALIAS)
    # Peel must not infer it: without the alias the chain stops at -32b.
    check(Catalogue.of("smoothie-qwen3"), "smoothie-qwen3-32b-i1", None, None)


def test_alias_classes_section_variant_examples():
    check(SPEC, "llama-3-70b-chat", "llama-3-70b", S.EXACT_ALIAS)
    check(Catalogue.of("llama-3-70b"), "llama-3-70b-chat", "llama-3-70b", S.PEEL)
    check(Catalogue.of("llama-3-70b"), "llama-3-70b-instruct", "llama-3-70b", S.PEEL)


# -- Catalogue construction ------------------------------------------------

@pytest.mark.parametrize("entry", [("", []), ("a*", []), ("a", [""]), ("a", "single-string")])
def test_catalogue_rejects_malformed_entries(entry):
    with pytest.raises((ValueError, TypeError)):
        Catalogue.of(entry)


def test_catalogue_accepts_entries_tuples_and_bare_ids():
    cat = Catalogue.of(Entry("a", ("x",)), ("b", ["y"]), "c")
    assert [e.id for e in cat.entries] == ["a", "b", "c"]
    assert resolve("y", cat).entry_id == "b"


# -- Properties ------------------------------------------------------------

names = st.one_of(
    st.text(max_size=1000),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=300),
    st.builds(lambda base, toks: base + "".join(toks),
              st.sampled_from([e.id for e in SPEC.entries] + ["org/x", "a/b/c/qwen3"]),
              st.lists(st.sampled_from(["-4bit", "-it", "-Q4_K_M", "-2409", "-20250101", "@20250101",
                                        "-32b", "-fp8", "-dynamic", "-UD-Q4_K_XL", "/", "-", "*"]),
                       max_size=12)),
)


@settings(max_examples=400, deadline=None)
@given(names)
def test_property_never_raises_bounded_and_deterministic(name):
    first = explain(name, SPEC)
    assert len(first.steps) <= 32
    assert explain(name, SPEC) == first
    assert resolve(name, SPEC) == first.resolution
    if first.resolution is not None:
        assert first.resolution.steps == first.steps


entry_ids = st.text(min_size=1, max_size=40).filter(lambda s: "*" not in s)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(entry_ids, st.lists(st.text(min_size=1, max_size=20), max_size=3)),
                min_size=1, max_size=8, unique_by=lambda e: e[0]))
def test_property_own_id_resolves_exactly(entries):
    cat = Catalogue.of(*entries)
    for id_, _ in entries:
        got = resolve(id_, cat)
        assert (got.entry_id, got.stage, got.matched) == (id_, S.EXACT_ID, id_)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(entry_ids, st.lists(st.text(min_size=1, max_size=20), max_size=3)), max_size=6),
       st.text(max_size=300))
def test_property_arbitrary_catalogues_never_raise(entries, name):
    trace = explain(name, Catalogue.of(*entries))
    assert len(trace.steps) <= 32
    assert explain(name, Catalogue.of(*entries)) == trace
