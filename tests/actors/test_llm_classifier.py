"""The LLM classifier's call against the in-process simulated backend, at exact virtual instants."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import attrs
import pytest
import trio

from switchyard.actors.llm_classifier import ClassifierFailed, classify_with_llm
from switchyard.actors.routing.classification import Classification
from switchyard.actors.usage import UsageLedger
from switchyard.config.schema import BackendConfig, BackendType, SimulatedFailure, Simulation, Snapshot
from switchyard.config.smart_routing import ClassifierSettings, CustomDomain, CustomLevel, LlmSettings
from switchyard.protocol.simulated.openai import SimulatedTransport
from switchyard.protocol.wires.upstream import Upstream

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

GOOD = '{"complexity": "moderate", "domain": "code", "confidence": 0.75}'
PAYLOAD = {"model": "auto", "messages": [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "Earlier question"},
    {"role": "assistant", "content": "Earlier answer"},
    {"role": "user", "content": "Write a function that merges two sorted lists."},
]}


def settings(**llm) -> ClassifierSettings:
    return ClassifierSettings(method="llm", llm=LlmSettings(**{"model": "tiny", **llm}))


def cls_backend(**extra) -> BackendConfig:
    return BackendConfig(name="cls", type=BackendType.SIMULATED, url="http://cls.simulated", models=("tiny",),
                         simulation=Simulation(latency=0.25, text=GOOD), **extra)


class Rig:
    def __init__(self, upstream: Upstream, backend: BackendConfig) -> None:
        self.upstream = upstream
        self.backend = backend
        self.ledger = UsageLedger()
        self.sim: SimulatedTransport = upstream.simulated["cls.simulated"]

    async def classify(self, s: ClassifierSettings, payload: dict | None = None,
                       backend: BackendConfig | None = None) -> Classification:
        return await classify_with_llm(self.upstream, backend or self.backend, s, payload or PAYLOAD,
                                       request_id="req-1", key_id="key-a", ledger=self.ledger,
                                       now=trio.current_time)

    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.sim.requests]

    def outcomes(self) -> list[tuple[str, int | None]]:
        return [(r.outcome, r.status) for r in self.ledger.recent(10)]


@contextlib.asynccontextmanager
async def rig(**extra) -> AsyncIterator[Rig]:
    backend = cls_backend(**extra)
    upstream = Upstream(Snapshot(backends=(backend,)))
    try:
        yield Rig(upstream, backend)
    finally:
        await upstream.aclose()


# --- structured output per backend type -------------------------------------------------


@pytest.mark.parametrize(("backend_type", "expected"), [
    (BackendType.OPENAI, {"type": "json_schema"}),
    (BackendType.VLLM, {"type": "json_schema"}),
    (BackendType.SGLANG, {"type": "json_schema"}),
    (BackendType.SIMULATED, {"type": "json_schema"}),
    (BackendType.OLLAMA, {"type": "json_object"}),
    (BackendType.GENERIC, None),
])
async def test_auto_structured_output_follows_the_backend_type(autojump_clock, backend_type, expected):
    async with rig() as r:
        result = await r.classify(settings(), backend=attrs.evolve(r.backend, type=backend_type))
        sent = r.bodies()[0]
        fmt = sent.get("response_format")
        assert (fmt and {"type": fmt["type"]}) == expected
        assert "tools" not in sent
        assert (result.complexity, result.domain, result.confidence, result.source) == ("moderate", "code", 0.75, "llm")


async def test_json_schema_body_is_strict_with_the_configured_taxonomy_as_enums(autojump_clock):
    s = attrs.evolve(settings(), custom_complexity_levels=(CustomLevel("specialized", "needs a fine-tune", 6),),
                     custom_domains=(CustomDomain("medical", "clinical questions"),))
    async with rig() as r:
        await r.classify(s)
        sent = r.bodies()[0]
        spec = sent["response_format"]["json_schema"]
        assert spec["strict"] is True
        assert spec["schema"]["properties"]["complexity"]["enum"][-1] == "specialized"
        assert spec["schema"]["properties"]["domain"]["enum"][-1] == "medical"
        system = sent["messages"][0]["content"]
        assert "- specialized (rank 6): needs a fine-tune" in system and "- medical: clinical questions" in system


async def test_tool_use_forces_the_classify_call_and_reads_its_arguments(autojump_clock):
    async with rig() as r:
        r.sim.script.append(Simulation(latency=0.25, tool_arguments='{"complexity": "expert", "domain": "reasoning"}',
                                       failure=SimulatedFailure(tool_call=True)))
        result = await r.classify(settings(structured_output="tool_use"))
        sent = r.bodies()[0]
        assert sent["tool_choice"] == {"type": "function", "function": {"name": "classify"}}
        assert [t["function"]["name"] for t in sent["tools"]] == ["classify"]
        assert "response_format" not in sent
        assert (result.complexity, result.domain, result.confidence) == ("expert", "reasoning", 0.8)


async def test_prompt_only_answer_is_read_out_of_fences_and_prose(autojump_clock):
    async with rig() as r:
        r.sim.script.append(Simulation(latency=0.25, text=f"Here you go:\n```json\n{GOOD}\n```\nHope it helps."))
        result = await r.classify(settings(structured_output="prompt_only"))
        assert "response_format" not in r.bodies()[0] and "tools" not in r.bodies()[0]
        assert (result.complexity, result.domain) == ("moderate", "code")


# --- the request itself --------------------------------------------------------------------


async def test_call_posts_chat_completions_with_bypass_header_and_backend_auth(autojump_clock):
    async with rig(api_key="sk-cls") as r:
        await r.classify(settings())
        request = r.sim.requests[0]
        assert request.method == "POST" and request.url.path == "/v1/chat/completions"
        assert request.headers["x-smart-route-bypass"] == "true"
        assert request.headers["authorization"] == "Bearer sk-cls"
        assert request.headers["content-type"] == "application/json"


async def test_body_is_the_configured_model_sampling_and_no_stream(autojump_clock):
    async with rig() as r:
        await r.classify(settings(temperature=0.3, max_output_tokens=60))
        sent = r.bodies()[0]
        assert (sent["model"], sent["temperature"], sent["max_tokens"], sent["stream"]) == ("tiny", 0.3, 60, False)


async def test_backend_wire_id_is_sent_for_the_classifier_model(autojump_clock):
    async with rig(upstream_ids={"tiny": "tiny-q4-wire"}) as r:
        await r.classify(settings())
        assert r.bodies()[0]["model"] == "tiny-q4-wire"


async def test_only_the_last_user_message_truncated_to_max_input_tokens_x4_is_sent(autojump_clock):
    payload = {"messages": [{"role": "user", "content": "an earlier turn"},
                            {"role": "user", "content": "x" * 5000}]}
    async with rig() as r:
        await r.classify(settings(max_input_tokens=10), payload)
        user = r.bodies()[0]["messages"][1]["content"]
        assert "<request>\n" + "x" * 40 + "\n</request>" in user
        assert "x" * 41 not in user and "earlier turn" not in user


async def test_no_classifier_model_fails_with_error_before_sending(autojump_clock):
    async with rig() as r:
        with pytest.raises(ClassifierFailed) as failed:
            await r.classify(settings(model=None))
        assert failed.value.reason == "error"
        assert r.sim.requests == [] and r.ledger.recent(10) == []


# --- retries, failures, timeouts and their usage records --------------------------------


async def test_malformed_answer_is_corrected_once_then_succeeds(autojump_clock):
    async with rig() as r:
        r.sim.script.append(Simulation(latency=0.25, text='{"complexity": "galaxy-brain", "domain": "code"}'))
        result = await r.classify(settings())
        assert result.complexity == "moderate"
        first, second = r.bodies()
        assert second["messages"][:2] == first["messages"]
        assert second["messages"][2] == {"role": "assistant",
                                         "content": '{"complexity": "galaxy-brain", "domain": "code"}'}
        assert "complexity: 'galaxy-brain' is not one of" in second["messages"][3]["content"]
        assert r.outcomes() == [("upstream_error", 200), ("ok", 200)]


async def test_malformed_twice_fails_malformed(autojump_clock):
    async with rig() as r:
        r.sim.script.extend([Simulation(latency=0.25, text="not json"), Simulation(latency=0.25, text="still not")])
        with pytest.raises(ClassifierFailed) as failed:
            await r.classify(settings())
        assert failed.value.reason == "malformed"
        assert len(r.sim.requests) == 2
        assert r.outcomes() == [("upstream_error", 200), ("upstream_error", 200)]


async def test_max_retries_0_fails_on_the_first_malformed_answer(autojump_clock):
    async with rig() as r:
        r.sim.script.append(Simulation(latency=0.25, text="not json"))
        with pytest.raises(ClassifierFailed) as failed:
            await r.classify(settings(max_retries=0))
        assert failed.value.reason == "malformed"
        assert len(r.sim.requests) == 1 and r.outcomes() == [("upstream_error", 200)]


async def test_upstream_5xx_is_upstream_error_without_retry(autojump_clock):
    async with rig() as r:
        r.sim.script.append(Simulation(latency=0.25, failure=SimulatedFailure(status=503)))
        with pytest.raises(ClassifierFailed) as failed:
            await r.classify(settings())
        assert failed.value.reason == "upstream_error"
        assert len(r.sim.requests) == 1 and r.outcomes() == [("upstream_error", 503)]


async def test_connection_reset_is_upstream_error_with_no_status(autojump_clock):
    async with rig() as r:
        r.sim.script.append(Simulation(latency=0.25, text=GOOD, failure=SimulatedFailure(reset_after_chunk=1)))
        with pytest.raises(ClassifierFailed) as failed:
            await r.classify(settings())
        assert failed.value.reason == "upstream_error"
        assert r.outcomes() == [("upstream_error", None)]


async def test_timeout_ends_the_call_at_exactly_timeout_ms(autojump_clock):
    async with rig() as r:
        r.sim.script.append(Simulation(latency=5.0, text=GOOD))
        t0 = trio.current_time()
        with pytest.raises(ClassifierFailed) as failed:
            await r.classify(settings(timeout_ms=2000))
        assert failed.value.reason == "timeout"
        assert trio.current_time() - t0 == 2.0
        [rec] = r.ledger.recent(10)
        assert (rec.outcome, rec.status, rec.latency_seconds, rec.output_tokens) == ("timeout", None, 2.0, 0)


async def test_timeout_bounds_both_tries_together(autojump_clock):
    async with rig() as r:
        r.sim.script.extend([Simulation(latency=1.5, text="not json"), Simulation(latency=1.5, text=GOOD)])
        t0 = trio.current_time()
        with pytest.raises(ClassifierFailed) as failed:
            await r.classify(settings(timeout_ms=2000))
        assert failed.value.reason == "timeout" and trio.current_time() - t0 == 2.0
        assert [(rec.outcome, rec.latency_seconds) for rec in r.ledger.recent(10)] == [
            ("upstream_error", 1.5), ("timeout", 0.5)]


async def test_every_try_records_classifier_usage_with_answer_model_and_tokens(autojump_clock):
    async with rig() as r:
        r.sim.script.append(Simulation(latency=0.25, text="not json"))
        await r.classify(settings())
        bad, good = r.ledger.recent(10)
        for rec in (bad, good):
            assert (rec.purpose, rec.request_id, rec.key_id, rec.backend, rec.model) == (
                "classifier", "req-1", "key-a", "cls", "tiny")
            assert rec.input_tokens > 0 and rec.latency_seconds == 0.25
        # The spec: a malformed 2xx answer is an upstream_error with status 200 and no output.
        assert (bad.outcome, bad.status, bad.output_tokens) == ("upstream_error", 200, 0)
        assert good.output_tokens > 0
        assert r.ledger.by_purpose() == {"classifier": {
            "requests": 2, "input_tokens": bad.input_tokens + good.input_tokens,
            "output_tokens": bad.output_tokens + good.output_tokens, "errors": 1}}


async def test_a_try_cancelled_from_outside_is_recorded_as_error(autojump_clock):
    async with rig() as r:
        r.sim.script.append(Simulation(latency=5.0, text=GOOD))
        with trio.move_on_after(0.5):
            await r.classify(settings(timeout_ms=2000))
        [rec] = r.ledger.recent(10)
        assert (rec.outcome, rec.status, rec.latency_seconds) == ("error", None, 0.5)
