"""Smart routing end to end under MockClock: model "auto" on /v1/chat/completions, the classifier
methods, debug headers, keys, load shedding, metrics, usage by purpose, and the admin routes."""

import json

import pytest
import trio

from switchyard.config.schema import SimulatedFailure, Simulation
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

ADMIN = [(b"authorization", b"Bearer admin-token-0123456789")]
KEY_HEADERS = [(b"authorization", b"Bearer sk-light")]

CONFIG = """
admin: {token: admin-token-0123456789}
health_checks: {interval: 1h}
server: {max_concurrent_requests: MAXCALLS}
KEYS
backends:
  - name: fleet
    type: simulated
    models: [flagship, standard, light]
    simulation: {latency: 10ms, chunks: 2}
  - name: judge
    type: simulated
    internal: true
    models: [judge-model]
    simulation: {latency: 100ms, text: '{"complexity": "expert", "domain": "code", "confidence": 0.9}'}
smart_routing:
  enabled: true
  debug_headers: true
  model_profiles:
    - {model: flagship, tier: 1, domains: [code, reasoning]}
    - {model: standard, tier: 2, domains: [general]}
    - {model: light, tier: 3, domains: [general]}
  routing_policies:
    - name: long_context
      when: {input_tokens: {gt: 3000}}
      route_to: {tier: 1}
    - name: code_to_standard
      when: {domain: [code]}
      route_to: {tier: 2, prefer_domains: [code]}
    - name: trivial_to_light
      when: {complexity: [trivial, simple]}
      route_to: {tier: 3}
    - name: tiered_key
      when: {key_tier: [gold]}
      route_to: {tier: 1}
    - name: hinted
      when: {header: {x-route-hint: [thorough]}}
      route_to: {tier: 1}
    - name: default_to_standard
      when: {}
      route_to: {tier: 2}
  classifier:
    method: METHOD
    shadow: SHADOW
    rule: {confidence_threshold: 0.7}
    llm: {model: judge-model, backend: judge, timeout_ms: 500, disable_under_load_state: critical}
"""

CODE = "Implement the REST API endpoint for rate limiting and write a function that refactors the handler."
MODERATE = ("Compare the economic effects of remote work on urban housing markets and evaluate the long-term "
            "trade-offs for city budgets.")
LONG = "Please read the following notes carefully. " + "The quarterly figures moved as expected. " * 400


def config(method="rule", shadow="false", keys="", max_calls=0):
    return (CONFIG.replace("METHOD", method).replace("SHADOW", shadow).replace("KEYS", keys)
            .replace("MAXCALLS", str(max_calls)))


def auto(content, model="auto"):
    return {"model": model, "messages": [{"role": "user", "content": content}]}


def models_sent(app, backend="fleet"):
    return [json.loads(r.content)["model"] for r in app.runtime.upstream.simulated[f"{backend}.simulated"].requests
            if r.url.path.endswith("/chat/completions")]


async def post(app, body, headers=None):
    return await request(app, "POST", "/v1/chat/completions", body, headers=headers)


async def test_auto_routes_a_trivial_question_a_code_task_and_a_long_prompt_to_three_tiers(autojump_clock):
    async with gateway(config()) as app:
        trivial = await post(app, auto("hi"))
        code = await post(app, auto(CODE))
        long = await post(app, auto(LONG))
        assert [trivial.status, code.status, long.status] == [200, 200, 200]
        assert models_sent(app) == ["light", "standard", "flagship"]
        assert [r.headers[b"x-smart-route-tier"] for r in (trivial, code, long)] == [b"3", b"2", b"1"]
        assert [r.headers[b"x-smart-route-policy"] for r in (trivial, code, long)] == [
            b"trivial_to_light", b"code_to_standard", b"long_context"]


async def test_debug_headers_carry_the_input_token_estimate_when_a_policy_uses_it(autojump_clock):
    async with gateway(config()) as app:
        reply = await post(app, auto(LONG))
        assert int(reply.headers[b"x-smart-route-input-tokens"]) > 3000
        assert reply.headers[b"x-smart-route-classification"].startswith(b"complexity=")


async def test_debug_headers_off_adds_no_smart_route_header(autojump_clock):
    async with gateway(config().replace("debug_headers: true", "debug_headers: false")) as app:
        reply = await post(app, auto("hi"))
        assert reply.status == 200 and not any(k.startswith(b"x-smart-route") for k in reply.headers)


async def test_bypass_header_skips_smart_routing(autojump_clock):
    async with gateway(config()) as app:
        reply = await post(app, auto("hi"), headers=[(b"x-smart-route-bypass", b"true")])
        assert reply.status == 404 and reply.json()["error"]["code"] == "model_not_found"
        assert models_sent(app) == []


async def test_a_named_model_is_not_intercepted_unless_intercept_all(autojump_clock):
    async with gateway(config()) as app:
        await post(app, auto("hi", model="flagship"))
        assert models_sent(app) == ["flagship"]
    intercepting = config().replace("enabled: true\n  debug", "enabled: true\n  intercept_all: true\n  debug")
    async with gateway(intercepting) as app:
        await post(app, auto("hi", model="flagship"))
        assert models_sent(app) == ["light"]


async def test_header_policy_matches_case_insensitively(autojump_clock):
    async with gateway(config()) as app:
        reply = await post(app, auto(MODERATE),
                           headers=[(b"x-route-hint", b"Thorough")])
        assert reply.headers[b"x-smart-route-policy"] == b"hinted" and models_sent(app) == ["flagship"]


async def test_key_tier_and_allowlist_shape_the_choice(autojump_clock):
    keys = """api_keys:
  - {id: gold-user, key: sk-gold, tier: gold}
  - {id: light-only, key: sk-light, allowed_models: [light]}
"""
    async with gateway(config(keys=keys)) as app:
        gold = await post(app, auto(MODERATE),
                          headers=[(b"authorization", b"Bearer sk-gold")])
        assert gold.headers[b"x-smart-route-policy"] == b"tiered_key"
        # The key's allowlist narrows the pool before the policy's tier is looked for: tier 2 is empty
        # for this key, so the nearest tier it may use answers.
        narrowed = await post(app, auto(CODE), headers=KEY_HEADERS)
        assert narrowed.status == 200 and narrowed.headers[b"x-smart-route-tier"] == b"3"
        assert models_sent(app) == ["flagship", "light"]


async def test_no_candidate_model_is_a_503_naming_smart_routing(autojump_clock):
    keys = "api_keys:\n  - {id: none, key: sk-none, allowed_models: [nothing]}\n"
    async with gateway(config(keys=keys)) as app:
        reply = await post(app, auto("hi"), headers=[(b"authorization", b"Bearer sk-none")])
        assert reply.status == 503 and "Smart routing found no model" in reply.json()["error"]["message"]


async def test_llm_method_routes_by_the_classifier_and_caches_its_answer(autojump_clock):
    async with gateway(config(method="llm")) as app:
        first = await post(app, auto("hi"))
        second = await post(app, auto("hi"))
        # The judge says code: code_to_standard; the second call is served from the cache.
        assert [first.headers[b"x-smart-route-policy"], second.headers[b"x-smart-route-policy"]] == [
            b"code_to_standard", b"code_to_standard"]
        assert b"source=llm" in first.headers[b"x-smart-route-classification"]
        assert b"source=cache" in second.headers[b"x-smart-route-classification"]
        judge = app.runtime.upstream.simulated["judge.simulated"]
        assert judge.count("request") == 1
        assert judge.requests[0].headers["x-smart-route-bypass"] == "true"
        usage = (await request(app, "GET", "/admin/stats", headers=ADMIN)).json()["by_purpose"]
        assert usage["classifier"]["requests"] == 1 and usage["client"]["requests"] == 2


async def test_llm_timeout_falls_back_to_the_rule_result_and_is_counted(autojump_clock):
    async with gateway(config(method="llm")) as app:
        app.runtime.upstream.simulated["judge.simulated"].script.append(Simulation(latency=5.0))
        t0 = trio.current_time()
        reply = await post(app, auto("hi"))
        assert reply.headers[b"x-smart-route-policy"] == b"trivial_to_light"
        # The classifier's 500 ms budget, then the light model's 10 ms.
        assert reply.ended_at - t0 == pytest.approx(0.5 + 0.01)
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'smart_routing_classifier_fallbacks_total{reason="timeout"} 1.0' in metrics


async def test_hybrid_escalates_only_below_the_confidence_threshold(autojump_clock):
    async with gateway(config(method="hybrid")) as app:
        await post(app, auto("hi"))                                    # no signal: 0.55 < 0.7, escalated
        await post(app, auto("Translate 'good morning' into Korean."))   # translation intent: 0.7, the rule routes
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'smart_routing_hybrid_gate_total{outcome="escalated"} 1.0' in metrics
        assert 'smart_routing_hybrid_gate_total{outcome="rule"} 1.0' in metrics
        assert app.runtime.upstream.simulated["judge.simulated"].count("request") == 1


async def test_llm_classifier_is_disabled_under_the_configured_load_state(autojump_clock):
    cfg = config(method="llm", max_calls=5).replace("disable_under_load_state: critical",
                                                    "disable_under_load_state: warning")
    cfg = cfg.replace("  - name: judge", "  - {name: slow, type: simulated, models: [slowpoke], "
                      "simulation: {latency: 10s}}\n  - name: judge")
    async with gateway(cfg) as app:
        async with trio.open_nursery() as nursery:
            for _ in range(4):   # four other calls open against a cap of five: warning
                nursery.start_soon(post, app, auto("hi", model="slowpoke"))
            await trio.sleep(1)
            reply = await post(app, auto("hi"))
        assert reply.headers[b"x-smart-route-policy"] == b"trivial_to_light"
        assert app.runtime.upstream.simulated["judge.simulated"].count("request") == 0
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'smart_routing_classifier_fallbacks_total{reason="load"} 1.0' in metrics
        await post(app, auto("hi"))   # nothing else open now: the classifier is asked
        assert app.runtime.upstream.simulated["judge.simulated"].count("request") == 1


async def test_shadow_mode_reports_the_other_classifier_and_agreement(autojump_clock):
    async with gateway(config(method="rule", shadow="true")) as app:
        reply = await post(app, auto("hi"))
        assert reply.headers[b"x-smart-route-policy"] == b"trivial_to_light"   # the rule result routes
        shadow = reply.headers[b"x-smart-route-shadow"].decode()
        assert shadow.startswith("complexity=expert;domain=code;confidence=0.90;agree=")
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'smart_routing_shadow_agreement_total{agree="false",field="complexity"} 1.0' in metrics


async def test_admin_simulate_takes_key_tier_org_and_headers(autojump_clock):
    async with gateway(config()) as app:
        body = {"payload": auto(MODERATE),
                "key_tier": "gold"}
        out = (await request(app, "POST", "/admin/smart-routing/simulate", body, headers=ADMIN)).json()
        assert out["policy"] == "tiered_key" and out["model"] == "flagship" and out["tier"] == 1
        assert out["input_tokens"] is not None and out["classification"]["language"] == "en"
        assert models_sent(app) == []   # simulate never dispatches


async def test_admin_status_lists_the_candidate_pool_with_sources(autojump_clock):
    async with gateway(config().replace("models: [flagship, standard, light]",
                                        "models: [flagship, standard, light, mystery-mini]")) as app:
        out = (await request(app, "GET", "/admin/smart-routing/status", headers=ADMIN)).json()
        assert {c["model"]: (c["tier"], c["source"]) for c in out["candidate_models"]} == {
            "flagship": (1, "explicit_exact"), "standard": (2, "explicit_exact"), "light": (3, "explicit_exact"),
            "mystery-mini": (3, "auto_inferred")}
        assert out["classifier"]["llm_backend"] == "judge"


async def test_admin_put_policies_validates_like_the_loader_and_applies_at_once(autojump_clock):
    async with gateway(config()) as app:
        bad = await request(app, "PUT", "/admin/smart-routing/policies",
                            {"routing_policies": [{"name": "x", "when": {"input_tokens": {"gte": 10, "lte": 10}},
                                                   "route_to": {"tier": 1}}]}, headers=ADMIN)
        assert bad.status == 400 and "input_tokens" in bad.json()["error"]["message"]
        ok = await request(app, "PUT", "/admin/smart-routing/policies",
                           {"routing_policies": [{"name": "all_flagship", "when": {}, "route_to": {"tier": 1}}]},
                           headers=ADMIN)
        assert ok.status == 200
        reply = await post(app, auto("hi"))
        assert reply.headers[b"x-smart-route-policy"] == b"all_flagship" and models_sent(app) == ["flagship"]


async def test_admin_put_model_profiles_rejects_a_negative_cost(autojump_clock):
    async with gateway(config()) as app:
        bad = await request(app, "PUT", "/admin/smart-routing/model-profiles",
                            {"model_profiles": [{"model": "light", "tier": 3, "cost_per_1k_input_tokens": -1}]},
                            headers=ADMIN)
        assert bad.status == 400 and "cost_per_1k_input_tokens" in bad.json()["error"]["message"]
        ok = await request(app, "PUT", "/admin/smart-routing/model-profiles",
                           {"model_profiles": [{"model": "standard", "tier": 3}]}, headers=ADMIN)
        assert ok.status == 200
        await post(app, auto("hi"))
        # now the only tier-3 model: light and flagship are unprofiled (default tier 2)
        assert models_sent(app) == ["standard"]


async def test_tool_use_answer_from_the_classifier_backend(autojump_clock):
    cfg = config(method="llm").replace("llm: {model: judge-model,",
                                       "llm: {structured_output: tool_use, model: judge-model,")
    async with gateway(cfg) as app:
        app.runtime.upstream.simulated["judge.simulated"].script.append(Simulation(
            latency=0.05, tool_arguments='{"complexity": "trivial", "domain": "general"}',
            failure=SimulatedFailure(tool_call=True)))
        reply = await post(app, auto("Write a careful comparison of two sorting algorithms."))
        assert reply.headers[b"x-smart-route-policy"] == b"trivial_to_light"


async def test_a_reload_applies_new_keywords_and_policies_to_the_next_request(autojump_clock):
    from switchyard.config.load import load_text

    async with gateway(config()) as app:
        before = await post(app, auto("판소리 사설 한 대목을 지어줘"))
        cfg = config().replace("rule: {confidence_threshold: 0.7}",
                               "rule: {confidence_threshold: 0.7, keywords: {ko: {creative: [판소리 사설]}}}")
        cfg = cfg.replace("    - name: long_context", "    - name: creative_up\n      when: {domain: [creative]}\n"
                          "      route_to: {tier: 1}\n    - name: long_context")
        app.runtime.apply(load_text(cfg).snapshot)
        after = await post(app, auto("판소리 사설 한 대목을 지어줘"))
        assert before.headers[b"x-smart-route-policy"] != b"creative_up"
        assert after.headers[b"x-smart-route-policy"] == b"creative_up"


async def test_under_intercept_all_the_bypass_header_only_skips_for_the_classifier_model(autojump_clock):
    intercepting = config().replace("enabled: true\n  debug", "enabled: true\n  intercept_all: true\n  debug")
    async with gateway(intercepting) as app:
        bypass = [(b"x-smart-route-bypass", b"true")]
        routed = await post(app, auto("hi", model="flagship"), headers=bypass)   # a client stepping around
        own = await post(app, auto("hi", model="judge-model"), headers=bypass)  # the classifier's own call
        assert routed.headers[b"x-smart-route-model"] == b"light" and models_sent(app) == ["light"]
        # not routed by smart routing; an internal backend, so not a client's model either
        assert own.status == 404 and b"x-smart-route-model" not in own.headers


async def test_an_x_backend_pin_keeps_only_the_models_that_backend_serves(autojump_clock):
    cfg = config().replace("  - name: judge", "  - {name: other, type: simulated, models: [standard], "
                           "simulation: {latency: 10ms}}\n  - name: judge")
    async with gateway(cfg) as app:
        reply = await post(app, auto("hi"), headers=[(b"x-backend", b"other")])   # trivial: tier 3 wanted
        assert reply.status == 200 and reply.headers[b"x-smart-route-model"] == b"standard"
        assert models_sent(app, "other") == ["standard"] and models_sent(app) == []


async def test_no_candidate_is_refused_with_route_events(autojump_clock):
    keys = "api_keys:\n  - {id: none, key: sk-none, allowed_models: [nothing]}\n"
    async with gateway(config(keys=keys)) as app:
        reply = await post(app, auto("hi"), headers=[(b"authorization", b"Bearer sk-none")])
        request_id = reply.headers[b"x-continuum-request-id"].decode()
        events = (await request(app, "GET", f"/admin/requests/{request_id}/events", headers=ADMIN)).json()
        assert [e["event"] for e in events["events"]] == ["accepted", "failed"]
        assert events["events"][-1]["detail"]["code"] == "no_healthy_backends"


async def test_odd_text_never_fails_the_call_in_llm_mode(autojump_clock):
    async with gateway(config(method="llm")) as app:
        # A lone surrogate is valid JSON; the classifier's cache key must not fail on it.
        reply = await post(app, {"model": "auto", "messages": [{"role": "user", "content": "bad \ud800 text"}]})
        assert reply.status == 200 and b"source=llm" in reply.headers[b"x-smart-route-classification"]


async def test_hybrid_threshold_0_never_escalates_and_1_always_does(autojump_clock):
    for threshold, escalated in (("0.0", 0), ("1.0", 1)):
        cfg = config(method="hybrid").replace("confidence_threshold: 0.7", f"confidence_threshold: {threshold}")
        async with gateway(cfg) as app:
            await post(app, auto("Translate 'good morning' into Korean."))
            assert app.runtime.upstream.simulated["judge.simulated"].count("request") == escalated


async def test_simulate_leaves_the_counters_alone(autojump_clock):
    async with gateway(config(method="hybrid")) as app:
        body = {"payload": auto("hi")}
        out = (await request(app, "POST", "/admin/smart-routing/simulate", body, headers=ADMIN)).json()
        assert out["classification"]["source"] == "llm"
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'smart_routing_hybrid_gate_total{outcome="escalated"} 0.0' in metrics
        assert "smart_routing_classifications_total{" not in metrics


async def test_an_unhealthy_classifier_backend_is_not_waited_for(autojump_clock):
    cfg = config(method="llm").replace("health_checks: {interval: 1h}",
                                       "health_checks: {interval: 1h, unhealthy_threshold: 1}")
    cfg = cfg.replace("simulation: {latency: 100ms, text:", "simulation: {latency: 100ms, health_status: 500, text:")
    async with gateway(cfg) as app:
        await trio.sleep(1)   # the first check has marked it unhealthy
        t0 = trio.current_time()
        reply = await post(app, auto("hi"))
        assert reply.headers[b"x-smart-route-policy"] == b"trivial_to_light"
        assert reply.ended_at - t0 == pytest.approx(0.01)
        metrics = (await request(app, "GET", "/metrics")).body.decode()
        assert 'smart_routing_classifier_fallbacks_total{reason="unhealthy"} 1.0' in metrics


async def test_cached_answers_expire_after_their_ttl_and_the_oldest_is_evicted_first(autojump_clock):
    cfg = config(method="llm").replace("timeout_ms: 500,", "timeout_ms: 500, cache_ttl_seconds: 60, "
                                       "max_cache_entries: 1,")
    async with gateway(cfg) as app:
        judge = app.runtime.upstream.simulated["judge.simulated"]
        await post(app, auto("hi"))
        await post(app, auto("hi"))             # cached
        await trio.sleep(61)
        await post(app, auto("hi"))             # expired: asked again
        await post(app, auto("hello there"))    # a second entry evicts "hi"
        await post(app, auto("hi"))
        assert judge.count("request") == 4


async def test_an_answer_in_flight_across_a_reload_is_not_cached(autojump_clock):
    from switchyard.config.load import load_text

    async with gateway(config(method="llm")) as app:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post, app, auto("hi"))
            await trio.sleep(0.05)   # the classifier call is out (100 ms)
            app.runtime.apply(load_text(config(method="llm").replace("timeout_ms: 500", "timeout_ms: 400")).snapshot)
        assert app.runtime.smart.classifier.cache_size == 0
        await post(app, auto("hi"))
        assert app.runtime.upstream.simulated["judge.simulated"].count("request") == 2


async def test_a_reload_forgets_inferred_tiers(autojump_clock):
    from switchyard.config.load import load_text

    cfg = config().replace("models: [flagship, standard, light]", "models: [flagship, standard, light, mystery]")
    async with gateway(cfg) as app:
        assert len(app.runtime.smart.tiers) == 0
        await post(app, auto("hi"))
        assert "mystery" in app.runtime.smart.tiers
        app.runtime.apply(load_text(cfg.replace("debug_headers: true", "debug_headers: false")).snapshot)
        assert "mystery" not in app.runtime.smart.tiers


async def test_a_non_ascii_header_value_matches_its_configured_value(autojump_clock):
    cfg = config().replace("x-route-hint: [thorough]", "x-route-hint: [thorough, 꼼꼼히]")
    async with gateway(cfg) as app:
        reply = await post(app, auto(MODERATE), headers=[(b"x-route-hint", "꼼꼼히".encode())])
        assert reply.headers[b"x-smart-route-policy"] == b"hinted"


async def test_a_cached_answer_is_used_even_when_load_skips_the_classifier(autojump_clock):
    cfg = config(method="llm", max_calls=5).replace("disable_under_load_state: critical",
                                                    "disable_under_load_state: warning")
    cfg = cfg.replace("  - name: judge", "  - {name: slow, type: simulated, models: [slowpoke], "
                      "simulation: {latency: 10s}}\n  - name: judge")
    async with gateway(cfg) as app:
        await post(app, auto("hi"))   # asked and cached
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(post, app, auto("hi", model="slowpoke"))
            await trio.sleep(1)
            reply = await post(app, auto("hi"))
        assert b"source=cache" in reply.headers[b"x-smart-route-classification"]
        assert app.runtime.upstream.simulated["judge.simulated"].count("request") == 1
