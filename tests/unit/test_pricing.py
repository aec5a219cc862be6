"""The pricing rules of the model metadata section, one test each, to the last digit (Decimal)."""

from decimal import Decimal

from switchyard.actors.ledger.counts import TokenCounts, counts_of
from switchyard.actors.ledger.pricing import cost_of, decimal_text, image_price
from switchyard.config.metadata import LongContext, Pricing

GPT = Pricing(input_tokens=5.0, output_tokens=30.0)


def test_rates_are_usd_per_million_tokens():
    assert cost_of(GPT, TokenCounts(input=1234, output=567)) == Decimal("0.02318")   # 6170 + 17010 micro-USD


def test_a_model_without_pricing_costs_none_not_zero():
    assert cost_of(None, TokenCounts(input=100, output=100)) is None
    assert cost_of(Pricing(), TokenCounts(input=100, output=100)) is None


def test_zero_rates_are_a_price_of_zero():
    assert cost_of(Pricing(input_tokens=0.0, output_tokens=0.0), TokenCounts(input=10, output=10)) == 0


def test_cached_input_discount_takes_its_fraction_off_cached_input():
    pricing = Pricing(input_tokens=5.0, output_tokens=30.0, cached_input_discount=0.9)
    # 800 uncached at 5, 200 cached at 0.5, 100 out at 30
    assert cost_of(pricing, TokenCounts(input=1000, output=100, cached=200)) == Decimal("0.0071")


def test_cached_tokens_without_a_discount_are_priced_as_input():
    assert cost_of(GPT, TokenCounts(input=1000, cached=400)) == Decimal("0.005")


def test_image_input_tokens_are_priced_at_their_rate_on_top_of_the_text_rates():
    pricing = Pricing(input_tokens=5.0, output_tokens=30.0, image_input_tokens=8.0)
    # 600 text tokens at 5 + 400 image tokens at 8
    assert cost_of(pricing, TokenCounts(input=1000, image_input=400)) == Decimal("0.0062")


def test_cached_image_input_tokens_have_an_explicit_rate_not_a_discount():
    pricing = Pricing(input_tokens=5.0, output_tokens=30.0, image_input_tokens=8.0, cached_image_input_tokens=2.0,
                      cached_input_discount=0.5)
    # text: 600 (100 cached at 2.5); image: 400 (300 cached at 2.0, 100 at 8.0)
    counts = TokenCounts(input=1000, cached=400, image_input=400, cached_image_input=300)
    assert cost_of(pricing, counts) == Decimal("0.0025") + Decimal("0.00025") + Decimal("0.0014")


def test_image_tokens_without_image_rates_are_text_tokens():
    assert cost_of(GPT, TokenCounts(input=1000, image_input=400)) == Decimal("0.005")


def test_long_context_rates_apply_to_the_whole_call_above_the_threshold():
    pricing = Pricing(input_tokens=0.1, output_tokens=0.5,
                      long_context=LongContext(threshold_tokens=100_000, input_tokens=0.5, output_tokens=2.5))
    assert cost_of(pricing, TokenCounts(input=100_001, output=1000)) == Decimal("0.0525005")


def test_long_context_threshold_itself_takes_the_base_rates():
    pricing = Pricing(input_tokens=0.1, output_tokens=0.5,
                      long_context=LongContext(threshold_tokens=100_000, input_tokens=0.5, output_tokens=2.5))
    assert cost_of(pricing, TokenCounts(input=100_000, output=1000)) == Decimal("0.0105")


def test_per_image_prices_each_generated_image_by_size_and_quality():
    pricing = Pricing(input_tokens=0.0, output_tokens=0.0,
                      per_image={"1024x1024": {"standard": 0.04, "hd": 0.08}, "512x512": 0.018})
    counts = TokenCounts(images=(("1024x1024", "hd", 2), ("512x512", None, 1)))
    assert cost_of(pricing, counts) == Decimal("0.178")
    assert image_price({"standard": 0.04}, None, "standard") == Decimal("0.04")
    assert image_price({"1024x1024": 0.02}, "256x256", None) == 0


def test_cost_text_is_a_plain_decimal():
    assert decimal_text(Decimal("0.0000050")) == "0.000005"
    assert decimal_text(Decimal("1E+1")) == "10"
    assert decimal_text(Decimal("0")) == "0"


def test_chat_usage_counts_cached_and_reasoning_details():
    usage = {"prompt_tokens": 100, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens": 30},
             "completion_tokens_details": {"reasoning_tokens": 20}}
    assert counts_of(usage) == TokenCounts(input=100, output=50, cached=30, reasoning=20)


def test_responses_usage_reads_input_and_output_details():
    usage = {"input_tokens": 100, "output_tokens": 50, "input_tokens_details": {"cached_tokens": 10,
                                                                               "image_tokens": 40},
             "output_tokens_details": {"reasoning_tokens": 5}}
    assert counts_of(usage) == TokenCounts(input=100, output=50, cached=10, reasoning=5, image_input=40)


def test_anthropic_usage_adds_cache_reads_and_writes_to_input():
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100,
             "cache_creation_input_tokens": 20}
    assert counts_of(usage) == TokenCounts(input=130, output=5, cached=100, cache_write=20)


def test_no_usage_object_is_no_counts():
    assert counts_of(None) is None
    assert counts_of({"prompt_tokens": -3, "completion_tokens": True}) == TokenCounts()


def test_cache_writes_and_reads_are_priced_at_their_own_rates():
    claude = Pricing(input_tokens=3.0, output_tokens=15.0, cache_write_input_tokens=3.75, cache_read_input_tokens=0.3)
    counts = TokenCounts(input=1_000_000 + 2_000_000 + 4_000_000, output=0, cached=2_000_000, cache_write=4_000_000)
    assert cost_of(claude, counts) == Decimal("3") + Decimal("0.6") + Decimal("15")


def test_without_cache_rates_writes_cost_the_input_rate_and_reads_the_discount():
    plain = Pricing(input_tokens=2.0, output_tokens=0.0, cached_input_discount=0.5)
    assert cost_of(plain, TokenCounts(input=3_000_000, cached=1_000_000, cache_write=1_000_000)) == Decimal("5")


def test_chat_usage_carries_cache_writes_in_its_details():
    usage = {"prompt_tokens": 30, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 10,
                                                                                    "cache_write_tokens": 15}}
    assert counts_of(usage) == TokenCounts(input=30, output=1, cached=10, cache_write=15)


def test_a_batch_line_costs_the_whole_less_the_batch_discount():
    pricing = Pricing(input_tokens=5.0, output_tokens=30.0, cached_input_discount=0.9, batch_discount=0.5)
    counts = TokenCounts(input=1000, output=100, cached=200)
    assert cost_of(pricing, counts) == Decimal("0.0071")
    assert cost_of(pricing, counts, batch=True) == Decimal("0.00355")
    assert cost_of(GPT, counts, batch=True) == cost_of(GPT, counts)   # no batch_discount: the full price


def _meter_cost(backend_type: str) -> Decimal | None:
    """A batch line's cost on one backend of ``backend_type`` serving ``m`` (half price in its metadata)."""
    from switchyard.actors.ledger.meter import CallMeter
    from switchyard.config.load import load_text
    snapshot = load_text(f"""
backends:
  - {{name: b, type: {backend_type}, url: "http://127.0.0.1:9", api_key: x, models: [m], discovery: false,
      model_configs: [{{id: m, metadata: {{pricing: {{input_tokens: 10.0, output_tokens: 10.0,
                                                        batch_discount: 0.5}}}}}}]}}
""").snapshot
    meter = CallMeter({}, snapshot, batch=True)
    meter.begin("m", "b")
    meter.settle({"prompt_tokens": 50_000, "completion_tokens": 50_000}, None)
    return meter.cost


def test_a_batch_line_the_gateway_runs_on_an_engine_is_priced_with_the_batch_discount():
    assert _meter_cost("vllm") == Decimal("0.5")


def test_a_batch_line_the_gateway_runs_on_a_providers_regular_api_is_priced_whole():
    """OpenAI bills a chat call at its full price; its batch price is only for batches relayed to it."""
    assert _meter_cost("openai") == Decimal("1")
