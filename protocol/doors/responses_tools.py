"""Enforce ``responses_tools`` on a ``POST /v1/responses`` body, before any routing.

A refused tool or resource id refuses the whole request with a 400 naming it
(``tools[mcp]``, ``tools[mcp] member of namespace 'ns'``,
``tools[file_search].vector_store_ids``, ``input[message].file_id``): a tool
is never silently removed and the rest forwarded, because the client would
get an answer computed without what it asked for.

Order per tool: client-executed types always pass (their members are judged
at any depth), then ``deny`` (any ASCII case), ``allow`` (exact), the modeled
hosted types and everything else. A tool that passes is then checked for the
resource ids ``deny_resource_fields`` names, and its nested ``tools`` list is
judged the same way. Anything the walk cannot read is refused as
``tools[unknown]``: what cannot be read cannot be shown to be allowed.

The log line says which rule refused; the request's bound fields give the
caller's key id, never the key, and no request value is logged.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from attrs import frozen

from switchyard.actors.errors import UnsupportedRequestParameter
from switchyard.config.responses_tools import (
    ALLOW,
    ALWAYS_ALLOWED,
    CLIENT_EXECUTION,
    CONTAINER_IDS,
    CONVERSATION,
    FILE_IDS,
    INPUT_ITEM_RESOURCE_IDS,
    MODELED_HOSTED,
    PREVIOUS_RESPONSE_ID,
    PROMPT,
    TOOL_SEARCH,
    VECTOR_STORE_IDS,
    ResponsesTools,
    ascii_fold,
)

log = logging.getLogger("switchyard.responses_tools")

UNKNOWN = "tools[unknown]"
MAX_DEPTH = 32        # nested tool lists (namespaces in namespaces ...) the walk will follow

# Keys whose non-empty value points at an upstream resource, by the
# ``deny_resource_fields`` entry that covers them in tools. ``container`` counts
# only as a string (a named container); as an object it is an automatic one.
TOOL_RESOURCE_KEYS: Mapping[str, str] = {
    "vector_store_ids": VECTOR_STORE_IDS, "vector_store_id": VECTOR_STORE_IDS,
    "container": CONTAINER_IDS, "container_id": CONTAINER_IDS, "container_ids": CONTAINER_IDS,
    "file_id": FILE_IDS, "file_ids": FILE_IDS,
}
# In input items every one of them is covered by ``input_item_resource_ids``.
INPUT_RESOURCE_KEYS: Mapping[str, str] = {key: INPUT_ITEM_RESOURCE_IDS for key in TOOL_RESOURCE_KEYS}
_INPUT_DENIED = frozenset({INPUT_ITEM_RESOURCE_IDS})
_NESTING = (TOOL_SEARCH, "programmatic_tool_calling")     # besides namespace: types with a member tools list


@frozen
class Where:
    """Where a tools list sits, for naming a refused tool: ``tools[mcp] member of namespace 'ns'``."""

    prefix: str = "tools"
    suffix: str = ""

    def tool(self, tool_type: str) -> str:
        return f"{self.prefix}[{tool_type}]{self.suffix}"

    def field(self, tool_type: str, key: str) -> str:
        return f"{self.prefix}[{tool_type}].{key}{self.suffix}"


TOP = Where()


def enforce(payload: Mapping[str, Any], policy: ResponsesTools) -> None:
    """Raise ``UnsupportedRequestParameter`` for the first tool or resource id ``policy`` refuses."""
    try:
        if payload.get("tools") is not None:
            _judge_list(payload["tools"], policy, TOP, 0, "tools")
        _judge_tool_choice(payload.get("tool_choice"), policy)
        _judge_top_level_ids(payload, policy)
        if INPUT_ITEM_RESOURCE_IDS in policy.deny_resource_fields:
            _judge_input(payload.get("input"))
    except UnsupportedRequestParameter as err:
        log.info("responses_tools refused a request: rule %s", (err.details or {}).get("rule"))
        raise


def enforce_mcp(payload: Mapping[str, Any], policy: ResponsesTools) -> None:
    """The policy's word on a chat completions body's ``mcp`` tools (docs/mcp.md): the same type rule as on
    ``/v1/responses``, so an operator decides in one place whether a key may send ``type: "mcp"``."""
    tools = payload.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, Mapping) and tool.get("type") == "mcp":
            try:
                _judge_type("mcp", policy, TOP.tool("mcp"))
            except UnsupportedRequestParameter as err:
                log.info("responses_tools refused a request: rule %s", (err.details or {}).get("rule"))
                raise


# --- tools --------------------------------------------------------------------

def _judge_tool_choice(choice: Any, policy: ResponsesTools) -> None:
    """A raw ``tool_choice`` object (``allowed_tools`` and the like) may carry its own tools list."""
    if isinstance(choice, Mapping) and choice.get("tools") is not None:
        _judge_list(choice["tools"], policy, Where(prefix="tool_choice.tools"), 0, "tool_choice.tools")


def _judge_list(tools: Any, policy: ResponsesTools, where: Where, depth: int, what: str) -> None:
    if not isinstance(tools, list):
        raise _unreadable(f"{what} is not an array")
    if depth > MAX_DEPTH:
        raise _unreadable(f"tools nested deeper than {MAX_DEPTH} levels")
    for tool in tools:
        _judge_tool(tool, policy, where, depth)


def _judge_tool(tool: Any, policy: ResponsesTools, where: Where, depth: int) -> None:
    if not isinstance(tool, Mapping):
        raise _unreadable("a tool is not an object")
    tool_type = tool.get("type")
    if not isinstance(tool_type, str) or not tool_type:
        raise _unreadable("a tool has no string type")
    if tool_type == "namespace":
        name = tool.get("name")
        if not isinstance(name, str) or not isinstance(tool.get("tools"), list):
            raise _unreadable("a namespace needs a string name and a tools array")
        _judge_list(tool["tools"], policy, Where(where.prefix, f" member of namespace '{name}'"), depth + 1,
                    f"the tools of namespace '{name}'")
        return
    client_search = tool_type == TOOL_SEARCH and tool.get("execution") == CLIENT_EXECUTION
    if not (tool_type in ALWAYS_ALLOWED or client_search):
        _judge_type(tool_type, policy, where.tool(tool_type))
        _judge_tool_resources(tool, tool_type, policy, where)
    # Members are judged whatever the container's spelling ("Namespace" must not hide a denied member).
    if (tool_type in _NESTING or isinstance(tool.get("tools"), list)) and tool.get("tools") is not None:
        _judge_list(tool["tools"], policy, Where(where.prefix, f" member of {tool_type}"), depth + 1,
                    f"the tools of {tool_type}")


def _judge_type(tool_type: str, policy: ResponsesTools, label: str) -> None:
    if ascii_fold(tool_type) in policy.deny:
        raise _refused(label, "deny", f"type {tool_type!r} is in responses_tools.deny", tool_type)
    if tool_type in policy.allow:
        return
    if tool_type in MODELED_HOSTED:
        if policy.modeled_hosted_types != ALLOW:
            raise _refused(label, "modeled_hosted_types",
                           "hosted tools are refused (responses_tools.modeled_hosted_types: deny)", tool_type)
        return
    if policy.unmodeled_types != ALLOW:
        raise _refused(label, "unmodeled_types",
                       f"type {tool_type!r} is not one this gateway models and responses_tools.unmodeled_types "
                       f"is deny; an operator may list it in responses_tools.allow", tool_type)


def _judge_tool_resources(tool: Mapping[str, Any], tool_type: str, policy: ResponsesTools, where: Where) -> None:
    """Resource ids anywhere in a backend-executed tool; its member ``tools`` are judged on their own."""
    body = {k: v for k, v in tool.items() if k != "tools"} if "tools" in tool else tool
    found = _first_resource(body, TOOL_RESOURCE_KEYS, policy.deny_resource_fields)
    if found:
        raise _resource(where.field(tool_type, found[0]), found[1])


# --- resource ids outside tools -------------------------------------------------

def _judge_top_level_ids(payload: Mapping[str, Any], policy: ResponsesTools) -> None:
    denied = policy.deny_resource_fields
    if PREVIOUS_RESPONSE_ID in denied and _points(payload.get("previous_response_id")):
        raise _resource("previous_response_id", PREVIOUS_RESPONSE_ID)
    for key, entry in ((CONVERSATION, CONVERSATION), (PROMPT, PROMPT)):
        value = payload.get(key)
        if entry not in denied or not _points(value):
            continue
        if isinstance(value, Mapping):
            if _points(value.get("id")):
                raise _resource(f"{key}.id", entry)
        else:
            raise _resource(key, entry)


def _judge_input(items: Any) -> None:
    """Every input item, its content parts and extra fields; the first resource id refuses."""
    if not isinstance(items, (list, Mapping)):
        return                                  # a plain string input points at nothing
    for item in items if isinstance(items, list) else [items]:
        if not isinstance(item, Mapping):
            continue
        item_type = item.get("type")
        if not isinstance(item_type, str) or not item_type:
            item_type = "message" if "role" in item else "unknown"
        if item_type == "item_reference" and _points(item.get("id")):
            raise _resource("input[item_reference].id", INPUT_ITEM_RESOURCE_IDS)
        found = _first_resource(item, INPUT_RESOURCE_KEYS, _INPUT_DENIED)
        if found:
            raise _resource(f"input[{item_type}].{found[0]}", INPUT_ITEM_RESOURCE_IDS)


def _first_resource(value: Any, keys: Mapping[str, str], denied: frozenset[str]) -> tuple[str, str] | None:
    """``(key, entry)`` of the first key (each mapping's own keys before its children) that points at a
    resource and whose entry is denied; None when there is none. Iterative: no depth limit to trip on."""
    stack = [value]
    while stack:
        node = stack.pop()
        children: list[Any] = []
        if isinstance(node, Mapping):
            for key, sub in node.items():
                entry = keys.get(key, "") if isinstance(key, str) else ""
                if entry in denied and _points_at(key, sub):
                    return key, entry
                if isinstance(sub, (Mapping, list)):
                    children.append(sub)
        elif isinstance(node, list):
            children = [sub for sub in node if isinstance(sub, (Mapping, list))]
        stack.extend(reversed(children))
    return None


def _points_at(key: str, value: Any) -> bool:
    if key == "container":          # an object is an automatic container, not a named one
        return isinstance(value, str) and value != ""
    return _points(value)


def _points(value: Any) -> bool:
    """null, "" and [] (and {}) point at nothing."""
    return value is not None and value != "" and value != [] and value != {}


# --- errors ---------------------------------------------------------------------

_SENT = "; the whole request was refused and nothing was sent upstream"


def _refused(param: str, rule: str, reason: str, tool_type: str) -> UnsupportedRequestParameter:
    return UnsupportedRequestParameter(f"{param} is not allowed by this gateway's responses_tools policy: "
                                       f"{reason}{_SENT}", param=param,
                                       details={"policy": "responses_tools", "rule": rule, "type": tool_type})


def _resource(param: str, entry: str) -> UnsupportedRequestParameter:
    return UnsupportedRequestParameter(
        f"{param} names an upstream resource, and this gateway refuses client-supplied resource ids "
        f"(responses_tools.deny_resource_fields includes {entry}){_SENT}",
        param=param, details={"policy": "responses_tools", "rule": "deny_resource_fields", "field": entry})


def _unreadable(why: str) -> UnsupportedRequestParameter:
    return UnsupportedRequestParameter(
        f"{UNKNOWN}: the tools could not be read ({why}); every tool must be an object with a string type, "
        f"a namespace needs a string name and a tools array, and every nested tools value must be an "
        f"array{_SENT}", param=UNKNOWN, details={"policy": "responses_tools", "rule": "unreadable"})
