"""What a ``type: bedrock`` backend may say (config/load_bedrock.py): one test per rule."""

from __future__ import annotations

import pytest

from switchyard.config.load import ConfigError, load_text

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"


def backend(**fields: str) -> str:
    body = {"name": "br", "type": "bedrock", "region": "us-east-1", "models": f"['{MODEL}']", **fields}
    return "backends:\n  - {" + ", ".join(f"{k}: {v}" for k, v in body.items() if v != "") + "}\n"


def loaded(text: str):
    return load_text(text, env={}).snapshot.backends[0]


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(text, env={})
    return info.value.errors


def test_the_url_defaults_to_the_regions_runtime():
    b = loaded(backend(region="eu-west-3"))
    assert (b.url, b.region, b.aws_profile) == ("https://bedrock-runtime.eu-west-3.amazonaws.com", "eu-west-3", None)


def test_a_given_url_is_kept_beside_the_region():
    assert loaded(backend(url="'https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com'")).url == \
        "https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com"


def test_the_region_is_required():
    assert errors_of(backend(region="")) == [
        "backends[0].region: is required for type bedrock (an AWS region such as us-east-1: it picks the "
        "runtime's url and scopes the signature)"]


def test_the_region_must_look_like_one():
    (error,) = errors_of(backend(region="'US East'"))
    assert error.startswith("backends[0].region: must be an AWS region such as us-east-1")


def test_models_are_required_since_nothing_is_discovered():
    (error,) = errors_of(backend(models=""))
    assert error.startswith("backends[0].models: is required for type bedrock")


def test_a_model_glob_is_refused():
    (error,) = errors_of(backend(models="['anthropic.*']"))
    assert error.startswith("backends[0].models[0]: must be an exact model id on a bedrock backend")


def test_discovery_is_off_and_cannot_be_turned_on():
    assert loaded(backend()).discovery is False
    (error,) = errors_of(backend(discovery="true"))
    assert error.startswith("backends[0].discovery: cannot be on for type bedrock")


def test_a_profile_and_an_api_key_are_not_both_set():
    (error,) = errors_of(backend(aws_profile="prod", api_key="k"))
    assert error.startswith("backends[0].aws_profile: and api_key are both set")


def test_region_and_aws_profile_belong_to_bedrock_only():
    text = "backends:\n  - {name: o, type: openai, url: 'http://h', region: us-east-1, aws_profile: p}\n"
    assert errors_of(text) == ["backends[0].region: only applies to backends of type bedrock, not openai",
                               "backends[0].aws_profile: only applies to backends of type bedrock, not openai"]


def test_a_buffered_fallback_dial_to_bedrock_keeps_its_permit_until_the_answer_is_read():
    from switchyard.actors.routing.dial_permits import permit_spans_answer
    b = loaded(backend())
    assert (permit_spans_answer(b, False), permit_spans_answer(b, True)) == (True, False)
