"""The guardrails' built-in detectors, masking and config, as pure functions (issue 23)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.actors.guardrails.detectors import BUILT_IN, iban_valid, luhn
from switchyard.actors.guardrails.texts import Slot, request_slots, rewrite
from switchyard.actors.guardrails.verdicts import Masker, judge
from switchyard.config.guardrails import Guardrail
from switchyard.config.load import ConfigError, load_text


def found(detector, text):
    return [text[s:e] for s, e in BUILT_IN[detector].find(text)]


@pytest.mark.parametrize("detector, text, value", [
    ("email", "연락처는 hong@example.com 입니다", "hong@example.com"),
    ("email", "write to first.last+tag@mail.example.co.uk.", "first.last+tag@mail.example.co.uk"),
    ("phone", "call +1 415 555 2671 today", "+1 415 555 2671"),
    ("phone", "휴대폰 010-1234-5678 으로", "010-1234-5678"),
    ("phone", "office (415) 555-2671", "(415) 555-2671"),
    ("payment_card", "card 4111 1111 1111 1111 exp 12/30", "4111 1111 1111 1111"),
    ("payment_card", "amex 378282246310005", "378282246310005"),
    ("iban", "pay to GB82 WEST 1234 5698 7654 32 please", "GB82 WEST 1234 5698 7654 32"),
    ("iban", "IBAN DE89370400440532013000", "DE89370400440532013000"),
    ("ip_address", "server at 192.168.10.25 is down", "192.168.10.25"),
    ("ip_address", "v6 2001:db8::8a2e:370:7334 answers", "2001:db8::8a2e:370:7334"),
    ("secret", "key sk-proj-abcdefghijklmnopqrstuvwx1234", "sk-proj-abcdefghijklmnopqrstuvwx1234"),
    ("secret", "anthropic sk-ant-api03-abcdefghijklmnopqrstuv", "sk-ant-api03-abcdefghijklmnopqrstuv"),
    ("secret", "aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    ("secret", "gh ghp_" + "a" * 36, "ghp_" + "a" * 36),
    ("secret", "slack xoxb-1234567890-abcdef", "xoxb-1234567890-abcdef"),
    ("secret", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
])
def test_each_detector_finds_its_shape(detector, text, value):
    assert found(detector, text) == [value]


def test_a_private_key_block_is_found_whole():
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc==\n-----END RSA PRIVATE KEY-----"
    assert found("secret", f"here:\n{block}\nthanks") == [block]


@pytest.mark.parametrize("detector, text", [
    ("email", "no address here, just user at example dot com"),
    ("email", "a handle like @someone is not an address"),
    ("phone", "the meeting is on 2024-01-15 at 10:30"),
    ("phone", "version 1.2.3 and order 12345"),
    ("payment_card", "card 4111 1111 1111 1112 fails the Luhn check"),
    ("payment_card", "order number 1234567890123"),
    ("iban", "GB82 WEST 1234 5698 7654 33 has a bad checksum"),
    ("ip_address", "999.1.1.1 is no address, nor is 1.2.3"),
    ("secret", "sk-short and the word secret are no secrets"),
])
def test_each_detector_passes_over_look_alikes(detector, text):
    assert found(detector, text) == []


def test_the_luhn_check_takes_a_valid_number_and_refuses_an_invalid_one():
    assert luhn("4539578763621486") and not luhn("4539578763621487")


def test_the_iban_check_is_mod_97():
    assert iban_valid("GB82WEST12345698765432") and not iban_valid("GB82WEST12345698765433")


def guardrail(**kw):
    kw.setdefault("name", "pii")
    return Guardrail(**kw)


def slots(*texts):
    return [Slot(("messages", i, "content"), "user", t) for i, t in enumerate(texts)]


def test_masking_gives_the_same_value_the_same_placeholder_across_messages():
    g = guardrail(detectors=(("email", "mask"), ("phone", "mask")))
    out = judge(g, "input", slots("Owner: a@x.com", "mail a@x.com or b@y.org, call +1 415 555 2671"), Masker())
    assert out.texts == ("Owner: <EMAIL_1>", "mail <EMAIL_1> or <EMAIL_2>, call <PHONE_1>")
    assert out.verdict.action == "mask" and dict(out.verdict.detectors) == {"email": 3, "phone": 1}


def test_block_wins_over_mask_and_names_the_detector():
    g = guardrail(detectors=(("email", "mask"), ("payment_card", "block")))
    out = judge(g, "input", slots("a@x.com 4111111111111111"), Masker())
    assert out.verdict.action == "block" and out.blocked_by == "payment_card"


def test_log_records_and_changes_nothing():
    g = guardrail(detectors=(("email", "log"),))
    out = judge(g, "input", slots("a@x.com"), Masker())
    assert out.texts == ("a@x.com",) and out.verdict.action == "log"


def test_monitor_mode_records_what_it_would_do_and_changes_nothing():
    g = guardrail(mode="monitor", detectors=(("email", "mask"), ("secret", "block")))
    out = judge(g, "input", slots("a@x.com"), Masker())
    assert out.texts == ("a@x.com",) and out.verdict.action == "mask" and out.blocked_by is None


def test_a_verdict_never_holds_the_matched_text():
    g = guardrail(detectors=(("email", "mask"),))
    out = judge(g, "input", slots("a@x.com"), Masker())
    assert "a@x.com" not in repr(out.verdict.as_dict())


def test_an_operator_pattern_masks_with_its_own_name():
    loaded = load_text(CONFIG + "    patterns:\n      - {name: employee_id, regex: 'EMP-\\d{6}', action: mask}\n")
    [g] = loaded.snapshot.guardrails
    out = judge(g, "input", slots("ask EMP-123456 or a@x.com"), Masker())
    assert out.texts == ("ask <EMPLOYEE_ID_1> or <EMAIL_1>",)


def test_texts_are_read_from_parts_system_messages_and_tool_call_arguments_and_written_back_in_place():
    payload = {"model": "m", "temperature": 0, "messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}]}
    got = request_slots(payload)
    assert [s.text for s in got] == ["s", "t", "{\"a\": 1}"] and got[2].arguments
    out = rewrite(payload, got, ["S", "T", "{\"a\": 2}"])
    assert out["messages"][1]["content"][0]["text"] == "T" and out["messages"][1]["content"][1]["type"] == "image_url"
    assert out["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{\"a\": 2}"
    assert payload["messages"][0]["content"] == "s"   # the original is untouched



def test_tool_calls_that_are_not_a_list_hold_no_text():
    # the chat door checks a message's role and content, nothing else of it
    for calls in (5, "x", {"function": {"arguments": "{}"}}):
        payload = {"messages": [{"role": "assistant", "content": "c", "tool_calls": calls}]}
        assert [s.text for s in request_slots(payload)] == ["c"]


def test_tool_call_arguments_nested_past_the_json_parser_are_masked_as_text():
    deep = "[" * 5000 + '"a@x.com"' + "]" * 5000   # json.loads gives up (RecursionError): not JSON to keep
    g = guardrail(detectors=(("email", "mask"),))
    out = judge(g, "input", [Slot(("messages", 0, "tool_calls", 0, "function", "arguments"), "assistant", deep,
                                  arguments=True)], Masker())
    assert out.texts == (deep.replace("a@x.com", "<EMAIL_1>"),) and out.unmaskable is None


CONFIG = """
backends: [{name: sim, type: simulated, models: [demo]}]
guardrails:
  - name: pii
    detectors: {email: mask}
"""


@pytest.mark.parametrize("text, error", [
    ("  - {name: a, detectors: {email: erase}}\n", "guardrails[0].detectors: email: must be one of mask, block, log"),
    ("  - {name: a, detectors: {ssn: mask}}\n", "guardrails[0].detectors: key 'ssn': must be one of email"),
    ("  - {name: a, patterns: [{name: x, regex: '(unclosed'}]}\n",
     "guardrails[0].patterns[0].regex: is not a valid regular expression"),
    ("  - {name: a, patterns: [{name: x, regex: 'a*'}]}\n",
     "guardrails[0].patterns[0].regex: must not match the empty string"),
    ("  - {name: a, mode: audit, detectors: {email: log}}\n", "guardrails[0].mode: must be one of enforce, monitor"),
    ("  - {name: a, stage: after, detectors: {email: log}}\n", "guardrails[0].stage: must be one of input"),
    ("  - {name: a}\n", "guardrails[0]: must name detectors, patterns, a webhook or a moderation model"),
    ("  - {name: a, webhook: {url: 'http://h/x', on_failure: retry}}\n",
     "guardrails[0].webhook.on_failure: must be one of fail_open, fail_closed"),
    ("  - {name: a, webhook: {timeout: 1s}}\n", "guardrails[0].webhook.url: is required"),
    ("  - {name: a, detectors: {email: log}, webhook: {url: 'http://h/x'}}\n",
     "guardrails[0].webhook: a guardrail has either detectors/patterns or a webhook"),
    ("  - {name: a, detectors: {email: log}}\n  - {name: a, detectors: {email: log}}\n",
     "guardrails[1].name: duplicate guardrail name 'a'"),
    ("  - {name: a, moderation: {timeout: 1s}}\n", "guardrails[0].moderation.model: is required"),
    ("  - {name: a, detectors: {email: log}, moderation: {model: m}}\n",
     "guardrails[0].moderation: a guardrail has either detectors/patterns or a moderation model, not both"),
    ("  - {name: a, webhook: {url: 'http://h/x'}, moderation: {model: m}}\n",
     "guardrails[0].moderation: a guardrail has either a webhook or a moderation model, not both"),
    ("  - {name: a, moderation: {model: m, categories: [violence, '']}}\n",
     "guardrails[0].moderation.categories: item [1] must not be empty"),
    ("  - {name: a, moderation: {model: m, categories: [7]}}\n",
     "guardrails[0].moderation.categories: item [0] must be a string"),
    ("  - {name: a, moderation: {model: m, threshold: 1.5}}\n",
     "guardrails[0].moderation.threshold: must be at most 1"),
    ("  - {name: a, moderation: {model: m, on_failure: retry}}\n",
     "guardrails[0].moderation.on_failure: must be one of fail_open, fail_closed"),
    ("  - {name: a, moderation: {model: m, severity: high}}\n", "guardrails[0].moderation.severity: unknown key"),
])
def test_every_bad_value_is_a_load_error_naming_its_path(text, error):
    with pytest.raises(ConfigError) as exc:
        load_text("backends: [{name: sim, type: simulated, models: [demo]}]\nguardrails:\n" + text)
    assert any(e.startswith(error) for e in exc.value.errors), exc.value.errors


MODERATED = """
backends:
  - {name: sim, type: simulated, models: [demo, omni-moderation-latest], discovery: false}
  - {name: local, type: ollama, url: 'http://127.0.0.1:9', models: [llama-guard], discovery: false}
guardrails:
  - {name: a, moderation: {model: MODEL}}
"""


def moderation_warnings(model):
    return [w for w in load_text(MODERATED.replace("MODEL", model), env={}).warnings if w.startswith("guardrails")]


def test_a_moderation_model_a_moderations_backend_lists_loads_without_a_warning():
    assert moderation_warnings("omni-moderation-latest") == []


@pytest.mark.parametrize("model", ["nobody-serves-it", "llama-guard"])   # the second: a kind without moderations
def test_a_moderation_model_no_backend_answering_moderations_lists_is_a_warning(model):
    assert moderation_warnings(model) == [
        f"guardrails[0].moderation.model: no enabled backend that answers moderations lists {model!r}; until one "
        "serves it, every check of guardrail 'a' fails and its on_failure decides"]


def test_a_moderation_guardrail_loads_its_settings():
    [g] = load_text("backends: [{name: sim, type: simulated, models: [m]}]\nguardrails:\n"
                    "  - {name: a, stage: both, moderation: {model: m, categories: [hate, violence], threshold: 0.4,"
                    " timeout: 500ms, on_failure: fail_open}}\n").snapshot.guardrails
    assert (g.moderation.model, g.moderation.categories, g.moderation.threshold, g.moderation.timeout,
            g.moderation.on_failure) == ("m", ("hate", "violence"), 0.4, 0.5, "fail_open")
    assert (g.webhook, g.detectors, g.patterns) == (None, (), ())


def test_the_admin_view_shows_a_patterns_source_and_masks_the_webhooks_headers():
    from switchyard.protocol.admin.api import public
    loaded = load_text("backends: [{name: sim, type: simulated, models: [demo]}]\nguardrails:\n"
                       "  - {name: a, patterns: [{name: emp, regex: 'EMP-\\d+'}]}\n"
                       "  - {name: b, webhook: {url: 'http://h/x',"
                       " headers: {authorization: Bearer hook-secret-4711}}}\n")
    view = public(loaded.snapshot.guardrails)
    assert view[0]["patterns"][0]["regex"] == "EMP-\\d+" and "compiled" not in view[0]["patterns"][0]
    assert view[1]["webhook"]["headers"] == "***" and "hook-secret-4711" not in repr(loaded.snapshot)


# Pieces of text that match each pattern (so the property is tested where matches exist), and the
# characters the needs look for, mixed with noise.
_MATCHING = ["a@b.cc", "x.y+z@mail.example.org", "+1 415 555 2671", "010-1234-5678", "4111 1111 1111 1111",
             "GB82 WEST 1234 5698 7654 32", "192.168.10.25", "2001:db8::8a2e:370:7334", "::1",
             "sk-proj-abcdefghijklmnopqrstuvwx1234", "sk-ant-api03-abcdefghijklmnopqrstuv",
             "AKIAIOSFODNN7EXAMPLE", "ghp_" + "a1" * 18, "github_pat_" + "b2" * 20, "xoxb-1234567890-abc",
             "eyJhbGciOiJIUzI1.eyJzdWIiOiIx.abcdefghij",
             "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "٣٣٣٣٣٣٣٣٣٣"]
_PIECES = st.sampled_from(_MATCHING + ["@", ":", "-", "_", ".", " ", "+", "(", ")", "gh", "a", "Z"]) | st.text(
    st.characters(whitelist_categories=("Lu", "Ll", "Nd")), max_size=6)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=24).map("".join))
def test_a_text_a_detector_skips_holds_nothing_its_patterns_would_match(text):
    """Each built-in's ``needs`` (the character or literal every match holds) skips only texts where
    its patterns find nothing: skipping the scan never hides a finding."""
    for detector in BUILT_IN.values():
        if detector.needs is not None and not detector.needs(text):
            assert not any(p.search(text) for p in detector.patterns), (detector.name, text)
