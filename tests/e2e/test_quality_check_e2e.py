"""End-to-end: ``fallback.quality_check`` through the official openai SDK on a real socket: an answer that
breaks the request's JSON schema falls back to the chain's next model, and the client gets the valid one."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.e2e.support import backend, gateway_config, in_thread

pytestmark = pytest.mark.simulator_history

SCHEMA = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"],
          "additionalProperties": False}


async def test_a_schema_invalid_answer_falls_back_and_the_sdk_gets_the_valid_one(start_gateway):
    big = {**backend("a", text='{"age": "three"}'), "models": ["big"]}
    small = {**backend("b", text='{"age": 3}'), "models": ["small"]}
    gw = await start_gateway(gateway_config(big, small, fallback={
        "enabled": True, "fallback_chains": {"big": ["small"]}, "quality_check": {"models": ["big"]}}))
    client = openai.OpenAI(base_url=gw.v1, api_key="x", max_retries=0, timeout=10)
    with client:
        def ask() -> Any:
            return client.chat.completions.with_raw_response.create(
                model="big", messages=[{"role": "user", "content": "how old?"}],
                response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}})

        raw = await in_thread(ask)
    answer = raw.parse()
    assert answer.model == "small" and json.loads(answer.choices[0].message.content) == {"age": 3}
    assert raw.headers["x-continuum-quality-check"] == "passed"
    assert raw.headers["x-fallback-model"] == "small"
