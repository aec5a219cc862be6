"""One test per rule of ``responses_tools``: loading (each error is the exact string the
operator sees: dotted path, then rule) and the request-time policy on a Responses body,
with the specification's examples."""

import io
import json
import logging
import textwrap

import pytest

from switchyard.actors import log_fields
from switchyard.actors.errors import UnsupportedRequestParameter
from switchyard.config.load import ConfigError, load_text
from switchyard.config.responses_tools import RESOURCE_FIELDS, ResponsesTools
from switchyard.protocol.doors.responses_tools import enforce
from switchyard.protocol.http import logs
from tests.harness import gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

BACKENDS = "backends: [{name: a, type: simulated, models: [m]}]\n"

SPEC_EXAMPLE = """
responses_tools:
  unmodeled_types: deny        # allow | deny
  modeled_hosted_types: allow  # allow | deny
  allow: [image_generation]    # exact wire types, overrides the two defaults
  deny: [web_search]           # wire types in any ASCII case, overrides the two defaults
  deny_resource_fields: [vector_store_ids, container_ids]  # default
"""


def policy(section: str) -> ResponsesTools:
    return load_text(BACKENDS + textwrap.dedent(section), env={}).snapshot.responses_tools


def errors_of(section: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_text(BACKENDS + textwrap.dedent(section), env={})
    return info.value.errors


DEFAULT = ResponsesTools()


def refusal(payload, pol=DEFAULT) -> UnsupportedRequestParameter:
    with pytest.raises(UnsupportedRequestParameter) as info:
        enforce(payload, pol)
    err = info.value
    assert err.status == 400 and err.code == "unsupported_request_parameter"
    return err


def refused_param(payload, pol=DEFAULT) -> str:
    return refusal(payload, pol).param


def body(*tools, **extra):
    return {"model": "m", "input": "hi", "tools": list(tools), **extra}


SPEC = policy(SPEC_EXAMPLE)


# --- loading ---------------------------------------------------------------------------

def test_absent_section_is_the_default_policy():
    p = policy("")
    assert p == ResponsesTools()
    assert (p.unmodeled_types, p.modeled_hosted_types, p.allow, p.deny) == ("deny", "allow", frozenset(), frozenset())
    assert p.deny_resource_fields == {"vector_store_ids", "container_ids"}


def test_spec_example_loads():
    assert SPEC == ResponsesTools(allow=frozenset({"image_generation"}), deny=frozenset({"web_search"}))


def test_modes_are_allow_or_deny():
    assert errors_of("responses_tools: {unmodeled_types: block, modeled_hosted_types: true}") == [
        "responses_tools.unmodeled_types: must be one of allow, deny, got 'block'",
        "responses_tools.modeled_hosted_types: must be one of allow, deny, got True"]


def test_unknown_key_is_a_load_error():
    assert errors_of("responses_tools: {alow: [mcp]}") == ["responses_tools.alow: unknown key"]


def test_lists_must_be_lists():
    assert errors_of("responses_tools: {allow: mcp, deny_resource_fields: vector_store_ids}") == [
        "responses_tools.allow: must be a list of tool type names, got string",
        "responses_tools.deny_resource_fields: must be a list of resource field names, got string"]


def test_entry_must_be_a_string():
    assert errors_of("responses_tools: {deny: [1]}") == [
        "responses_tools.deny[0]: must be a tool type name (a string), got integer"]


def test_empty_entry_is_a_load_error():
    assert errors_of("responses_tools: {allow: [mcp, '']}") == ["responses_tools.allow[1]: must not be empty"]


@pytest.mark.parametrize("entry, what", [
    ("web search", "a space"),
    ("mcp\\t", "U+0009 (Cc)"),
    ("mcp\\x7f", "U+007F (Cc)"),
    ("mc\\u200bp", "U+200B (ZERO WIDTH SPACE)"),
    ("image\\u00adgeneration", "U+00AD (SOFT HYPHEN)"),
    ("\\ufeffmcp", "U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
    ("\\u043ccp", "U+043C (CYRILLIC SMALL LETTER EM)"),
])
def test_entry_must_be_printable_ascii(entry, what):
    [error] = errors_of(f'responses_tools: {{deny: ["{entry}"]}}')
    assert error.startswith("responses_tools.deny[0]: ")
    assert f"contains {what}, which is not printable ASCII; such an entry could never match a tool type" in error


def test_always_allowed_type_in_a_list_is_a_load_error_in_any_ascii_case():
    assert errors_of("responses_tools: {allow: [function], deny: [Local_Shell, NAMESPACE, custom]}") == [
        "responses_tools.allow[0]: 'function' names function, which is executed by the client and always "
        "allowed; only backend-executed types belong in allow or deny",
        "responses_tools.deny[0]: 'Local_Shell' names local_shell, which is executed by the client and always "
        "allowed; only backend-executed types belong in allow or deny",
        "responses_tools.deny[1]: 'NAMESPACE' names namespace, which is executed by the client and always "
        "allowed; only backend-executed types belong in allow or deny",
        "responses_tools.deny[2]: 'custom' names custom, which is executed by the client and always "
        "allowed; only backend-executed types belong in allow or deny"]


def test_tool_search_may_be_listed_because_only_its_server_form_is_judged():
    assert policy("responses_tools: {deny: [tool_search]}").deny == {"tool_search"}


def test_type_in_both_lists_is_a_load_error_in_any_ascii_case():
    assert errors_of("responses_tools: {allow: [image_generation, mcp], deny: [MCP]}") == [
        "responses_tools.deny[0]: 'MCP' is also in allow (responses_tools.allow[1]); a type cannot be both "
        "allowed and denied (compared in any ASCII case)"]


def test_unknown_resource_field_is_a_load_error():
    assert errors_of("responses_tools: {deny_resource_fields: [vector_store_id, file_ids, 3]}") == [
        "responses_tools.deny_resource_fields[0]: unknown resource field 'vector_store_id' (did you mean "
        "vector_store_ids?); expected one of vector_store_ids, container_ids, file_ids, previous_response_id, "
        "conversation, prompt, input_item_resource_ids",
        "responses_tools.deny_resource_fields[2]: must be a resource field name (a string), got integer"]


def test_every_resource_field_loads_and_an_empty_list_denies_none():
    assert policy(f"responses_tools: {{deny_resource_fields: [{', '.join(RESOURCE_FIELDS)}]}}"
                  ).deny_resource_fields == set(RESOURCE_FIELDS)
    assert policy("responses_tools: {deny_resource_fields: []}").deny_resource_fields == frozenset()


# --- tool types --------------------------------------------------------------------------

CLIENT_TOOLS = [
    {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"file_id": {}}}},
    {"type": "custom", "name": "c"},
    {"type": "local_shell"},
    {"type": "namespace", "name": "ns", "description": "d", "tools": [{"type": "function", "name": "g"}]},
    {"type": "tool_search", "execution": "client"},
]
DENY_ALL = ResponsesTools(unmodeled_types="deny", modeled_hosted_types="deny",
                          deny=frozenset({"tool_search", "web_search", "mcp"}))


def test_client_executed_types_are_always_allowed():
    enforce(body(*CLIENT_TOOLS), DENY_ALL)


def test_deny_tool_search_refuses_only_the_server_form():
    enforce(body({"type": "tool_search", "execution": "client"}), DENY_ALL)
    assert refused_param(body({"type": "tool_search", "execution": "server"}), DENY_ALL) == "tools[tool_search]"
    assert refused_param(body({"type": "tool_search"}), DENY_ALL) == "tools[tool_search]"


def test_deny_refuses_a_modeled_hosted_type():
    err = refusal(body({"type": "web_search"}), SPEC)
    assert err.param == "tools[web_search]"
    assert err.details == {"policy": "responses_tools", "rule": "deny", "type": "web_search"}
    assert err.message.startswith("tools[web_search] is not allowed by this gateway's responses_tools policy")
    assert err.message.endswith("the whole request was refused and nothing was sent upstream")


def test_deny_matches_in_any_ascii_case():
    pol = ResponsesTools(unmodeled_types="allow", deny=frozenset({"mcp"}))
    for spelling in ("mcp", "MCP", "Mcp"):
        assert refused_param(body({"type": spelling}), pol) == f"tools[{spelling}]"
    # Only A-Z fold: a KELVIN SIGN does not become "k" (str.lower would make it so).
    enforce(body({"type": "\u212a_tool"}), ResponsesTools(unmodeled_types="allow", deny=frozenset({"k_tool"})))


def test_deny_wins_over_allow():
    pol = ResponsesTools(allow=frozenset({"mcp"}), deny=frozenset({"mcp"}))
    assert refusal(body({"type": "mcp"}), pol).details["rule"] == "deny"


def test_allow_passes_an_unmodeled_type_exactly():
    enforce(body({"type": "image_generation"}), SPEC)
    err = refusal(body({"type": "Image_Generation"}), SPEC)
    assert (err.param, err.details["rule"]) == ("tools[Image_Generation]", "unmodeled_types")


def test_modeled_hosted_types_follow_their_setting():
    modeled = ["web_search", "file_search", "code_interpreter", "computer_use", "programmatic_tool_calling"]
    enforce(body(*({"type": t} for t in modeled)), ResponsesTools())
    off = ResponsesTools(modeled_hosted_types="deny")
    for t in modeled:
        err = refusal(body({"type": t}), off)
        assert (err.param, err.details["rule"]) == (f"tools[{t}]", "modeled_hosted_types")


def test_modeled_list_matches_exactly_so_a_case_variant_is_unmodeled():
    err = refusal(body({"type": "WEB_SEARCH"}), ResponsesTools())
    assert (err.param, err.details["rule"]) == ("tools[WEB_SEARCH]", "unmodeled_types")


def test_unmodeled_types_follow_their_setting():
    for t in ("mcp", "image_generation", "shell", "apply_patch", "web_search_preview"):
        err = refusal(body({"type": t}), ResponsesTools())
        assert (err.param, err.details["rule"]) == (f"tools[{t}]", "unmodeled_types")
    enforce(body({"type": "mcp", "server_label": "x"}), ResponsesTools(unmodeled_types="allow"))


def test_tool_search_with_another_execution_is_unmodeled():
    assert refusal(body({"type": "tool_search", "execution": "server"})).details["rule"] == "unmodeled_types"
    enforce(body({"type": "tool_search", "execution": "server"}), ResponsesTools(allow=frozenset({"tool_search"})))


def test_namespace_member_is_judged_and_named():
    ns = {"type": "namespace", "name": "ns", "description": "d", "tools": [{"type": "function", "name": "f"},
                                                                          {"type": "mcp", "server_label": "x"}]}
    assert refused_param(body(ns)) == "tools[mcp] member of namespace 'ns'"


def test_namespace_members_are_judged_at_any_depth():
    inner = {"type": "namespace", "name": "inner", "tools": [{"type": "web_search"}]}
    outer = {"type": "namespace", "name": "outer", "tools": [{"type": "function", "name": "f"}, inner]}
    assert refused_param(body(outer), SPEC) == "tools[web_search] member of namespace 'inner'"


def test_nested_lists_of_forwarded_tools_are_judged():
    search = {"type": "tool_search", "execution": "client", "tools": [{"type": "mcp"}]}
    assert refused_param(body(search)) == "tools[mcp] member of tool_search"
    ptc = {"type": "programmatic_tool_calling", "tools": [{"type": "function", "name": "f"}, {"type": "mcp"}]}
    assert refused_param(body(ptc)) == "tools[mcp] member of programmatic_tool_calling"
    choice = {"type": "allowed_tools", "mode": "auto",
              "tools": [{"type": "function", "name": "get_weather"}, {"type": "mcp", "server_label": "deepwiki"}]}
    assert refused_param(body({"type": "function", "name": "get_weather"}, tool_choice=choice)) == \
        "tool_choice.tools[mcp]"
    enforce(body(tool_choice="auto"), ResponsesTools())
    enforce(body(tool_choice={"type": "function", "name": "f"}), ResponsesTools())


def test_tools_value_that_is_not_an_array_is_tools_unknown():
    for payload in (
        {"tools": {"type": "mcp"}},
        body({"type": "tool_search", "execution": "client", "tools": {"type": "mcp"}}),
        body({"type": "programmatic_tool_calling", "tools": "mcp"}),
        body(tool_choice={"type": "allowed_tools", "mode": "auto", "tools": "all"}),
    ):
        err = refusal(payload)
        assert (err.param, err.details["rule"]) == ("tools[unknown]", "unreadable")


def test_unreadable_nested_namespace_is_tools_unknown():
    for ns in ({"type": "namespace", "name": "ns"},
               {"type": "namespace", "name": "ns", "tools": None},
               {"type": "namespace", "tools": []},
               {"type": "namespace", "name": "ns", "tools": [{"type": "namespace", "name": 7, "tools": []}]}):
        assert refused_param(body(ns)) == "tools[unknown]"


def test_unreadable_tool_is_tools_unknown():
    for tool in ("mcp", None, {"name": "f"}, {"type": ""}, {"type": 3}):
        assert refused_param(body(tool)) == "tools[unknown]"


def test_namespaces_nested_too_deep_are_tools_unknown():
    tool: dict = {"type": "function", "name": "f"}
    for i in range(40):
        tool = {"type": "namespace", "name": f"n{i}", "tools": [tool]}
    assert refused_param(body(tool)) == "tools[unknown]"


def test_whole_request_is_refused_and_nothing_is_removed():
    payload = body({"type": "function", "name": "f"}, {"type": "mcp"}, {"type": "web_search"})
    before = repr(payload)
    refusal(payload)
    assert repr(payload) == before


def test_first_refused_tool_in_order_is_named():
    assert refused_param(body({"type": "web_search"}, {"type": "mcp"}), SPEC) == "tools[web_search]"


def test_no_tools_passes():
    enforce({"model": "m", "input": "hi"}, DENY_ALL)
    enforce({"model": "m", "input": "hi", "tools": None}, DENY_ALL)
    enforce(body(), DENY_ALL)


# --- deny_resource_fields ----------------------------------------------------------------

def test_vector_store_ids_are_refused_by_default():
    err = refusal(body({"type": "file_search", "vector_store_ids": ["vs_1"]}))
    assert err.param == "tools[file_search].vector_store_ids"
    assert err.details == {"policy": "responses_tools", "rule": "deny_resource_fields", "field": "vector_store_ids"}
    assert "vs_1" not in err.message


def test_named_container_is_refused_by_default_and_an_automatic_one_passes():
    assert refused_param(body({"type": "code_interpreter", "container": "cntr_1"})) == \
        "tools[code_interpreter].container"
    shell = {"type": "shell", "environment": {"type": "container_reference", "container_id": "cntr_1"}}
    assert refused_param(body(shell), ResponsesTools(allow=frozenset({"shell"}))) == "tools[shell].container_id"
    enforce(body({"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file_1"]}}), ResponsesTools())


def test_file_ids_entry_refuses_files_handed_to_hosted_tools():
    pol = ResponsesTools(deny_resource_fields=frozenset({"file_ids"}))
    assert refused_param(body({"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["f"]}}),
                         pol) == "tools[code_interpreter].file_ids"
    mask = {"type": "image_generation", "input_image_mask": {"file_id": "file_1"}}
    assert refused_param(body(mask), ResponsesTools(unmodeled_types="allow", deny_resource_fields=frozenset(
        {"file_ids"}))) == "tools[image_generation].file_id"


def test_empty_resource_values_point_at_nothing():
    enforce(body({"type": "file_search", "vector_store_ids": []}, {"type": "code_interpreter", "container": ""},
                 {"type": "computer_use", "container_id": None}), ResponsesTools())


def test_empty_deny_resource_fields_lets_resource_ids_through():
    none = ResponsesTools(deny_resource_fields=frozenset())
    enforce(body({"type": "file_search", "vector_store_ids": ["vs_1"]},
                 {"type": "code_interpreter", "container": "cntr_1"}), none)


def test_resource_fields_apply_to_namespace_members_and_nested_lists():
    fs = {"type": "file_search", "vector_store_ids": ["vs_1"]}
    assert refused_param(body({"type": "namespace", "name": "ns", "tools": [fs]})) == \
        "tools[file_search].vector_store_ids member of namespace 'ns'"
    assert refused_param(body({"type": "tool_search", "execution": "client", "tools": [fs]})) == \
        "tools[file_search].vector_store_ids member of tool_search"
    assert refused_param(body({"type": "programmatic_tool_calling", "tools": [fs]})) == \
        "tools[file_search].vector_store_ids member of programmatic_tool_calling"
    assert refused_param(body(tool_choice={"type": "allowed_tools", "mode": "auto", "tools": [fs]})) == \
        "tool_choice.tools[file_search].vector_store_ids"


def test_client_executed_tools_are_not_searched_for_resource_ids():
    fn = {"type": "function", "name": "f", "parameters": {"properties": {"vector_store_ids": {"type": "array"}},
                                                          "default": {"container_id": "x"}}}
    enforce(body(fn), ResponsesTools())


@pytest.mark.parametrize("field, payload, param", [
    ("previous_response_id", {"previous_response_id": "resp_1"}, "previous_response_id"),
    ("conversation", {"conversation": "conv_1"}, "conversation"),
    ("conversation", {"conversation": {"id": "conv_1"}}, "conversation.id"),
    ("prompt", {"prompt": {"id": "pmpt_1", "version": "2"}}, "prompt.id"),
])
def test_top_level_resource_fields_are_refused_only_when_listed(field, payload, param):
    request = {"model": "m", "input": "hi", **payload}
    enforce(request, ResponsesTools())
    err = refusal(request, ResponsesTools(deny_resource_fields=frozenset({field})))
    assert (err.param, err.details["field"]) == (param, field)
    enforce({**request, **{k: None for k in payload}}, ResponsesTools(deny_resource_fields=frozenset({field})))


INPUT_IDS = ResponsesTools(deny_resource_fields=frozenset({"input_item_resource_ids"}))


def test_input_item_resource_ids_name_the_item_and_the_field():
    ci = {"type": "code_interpreter_call", "id": "ci_1", "code": "1", "container_id": "cntr_1", "status": "completed"}
    assert refused_param({"input": [ci]}, INPUT_IDS) == "input[code_interpreter_call].container_id"
    msg = {"role": "user", "content": [{"type": "input_text", "text": "read"},
                                       {"type": "input_file", "file_id": "file_1"}]}
    assert refused_param({"input": [msg]}, INPUT_IDS) == "input[message].file_id"
    typed = {"type": "message", "role": "user", "content": [{"type": "input_image", "file_id": "file_2"}]}
    assert refused_param({"input": [typed]}, INPUT_IDS) == "input[message].file_id"


def test_input_walk_covers_extra_fields_of_typed_items():
    out = {"type": "function_call_output", "call_id": "c", "output": "ok", "extra": {"vector_store_ids": ["vs"]}}
    assert refused_param({"input": [out]}, INPUT_IDS) == "input[function_call_output].vector_store_ids"
    assert refused_param({"input": [{"type": "item_reference", "id": "msg_1"}]}, INPUT_IDS) == \
        "input[item_reference].id"


def test_input_refuses_the_first_resource_value():
    first = {"type": "message", "role": "user", "content": [{"type": "input_file", "file_id": "f"}]}
    second = {"type": "code_interpreter_call", "container_id": "c"}
    assert refused_param({"input": [first, second]}, INPUT_IDS) == "input[message].file_id"


def test_input_keys_that_point_at_nothing_pass():
    items = [{"type": "message", "role": "user", "content": [{"type": "input_file", "file_id": None},
                                                              {"type": "input_image", "file_id": ""}]},
             {"type": "code_interpreter_call", "container_id": "", "outputs": []},
             {"type": "x", "file_ids": []}]
    enforce({"input": items}, INPUT_IDS)
    enforce({"input": "a plain string"}, INPUT_IDS)


def test_input_items_are_not_walked_unless_listed():
    enforce({"input": [{"type": "code_interpreter_call", "container_id": "cntr_1"}]}, ResponsesTools())


# --- logging -----------------------------------------------------------------------------

def test_refusal_log_line_carries_the_key_id_and_no_request_value(caplog):
    token = log_fields.bind(key_id="key-7")
    try:
        with caplog.at_level(logging.INFO, logger="switchyard.responses_tools"):
            refusal(body({"type": "file_search", "vector_store_ids": ["vs_secret"]}))
        [record] = caplog.records
        assert record.getMessage() == "responses_tools refused a request: rule deny_resource_fields"
        assert logs.fields_of(record) == {"key_id": "key-7"}
    finally:
        log_fields.unbind(token)


# --- through the gateway -------------------------------------------------------------------

GATEWAY = """
health_checks: {interval: 1h}
api_keys:
  - {id: team-a, key: sk-team-a-0123456789abcdef}
responses_tools: {deny: [web_search]}
backends:
  - {name: a, type: simulated, models: [m], simulation: {latency: 10ms, chunks: 2}}
"""
KEY = [(b"authorization", b"Bearer sk-team-a-0123456789abcdef")]


def posts(app) -> list:
    return [r for r in app.runtime.upstream.simulated["a.simulated"].requests if r.method == "POST"]


async def test_denied_tool_gets_the_400_before_any_upstream_io(autojump_clock):
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("switchyard.responses_tools")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        async with gateway(GATEWAY) as app:
            ns = {"type": "namespace", "name": "ns", "description": "d",
                  "tools": [{"type": "mcp", "server_label": "x"}]}
            for tools, param in (([{"type": "web_search"}], "tools[web_search]"),
                                 ([ns], "tools[mcp] member of namespace 'ns'"),
                                 ([{"type": "file_search", "vector_store_ids": ["vs_1"]}],
                                  "tools[file_search].vector_store_ids")):
                reply = await request(app, "POST", "/v1/responses",
                                      {"model": "m", "input": "hi", "stream": True, "tools": tools}, KEY)
                error = reply.json()["error"]
                assert (reply.status, error["param"], error["code"]) == (400, param, "unsupported_request_parameter")
            assert posts(app) == []
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["message"], line["key_id"]) for line in lines] == [
        ("responses_tools refused a request: rule deny", "team-a"),
        ("responses_tools refused a request: rule unmodeled_types", "team-a"),
        ("responses_tools refused a request: rule deny_resource_fields", "team-a")]
    assert "sk-team-a" not in out.getvalue() and "vs_1" not in out.getvalue()


async def test_allowed_tools_reach_the_backend(autojump_clock):
    async with gateway(GATEWAY) as app:
        body = {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f"}, {"type": "file_search"}]}
        reply = await request(app, "POST", "/v1/responses", body, KEY)
        assert reply.status == 200
        assert len(posts(app)) == 1


async def test_a_reloaded_policy_applies_from_the_next_request(autojump_clock):
    async with gateway(GATEWAY) as app:
        body = {"model": "m", "input": "hi", "tools": [{"type": "image_generation"}]}
        assert (await request(app, "POST", "/v1/responses", body, KEY)).status == 400
        app.runtime.apply(load_text(GATEWAY.replace("{deny: [web_search]}", "{allow: [image_generation]}")).snapshot)
        assert (await request(app, "POST", "/v1/responses", body, KEY)).status == 200
        assert len(posts(app)) == 1


def test_members_of_a_container_in_another_spelling_are_judged_too():
    policy = ResponsesTools(unmodeled_types="allow", deny=frozenset({"mcp"}))
    payload = {"model": "m", "input": "hi",
               "tools": [{"type": "Namespace", "name": "ns", "tools": [{"type": "mcp", "server_label": "x"}]}]}
    with pytest.raises(UnsupportedRequestParameter):
        enforce(payload, policy)
