"""``responses_tools``: which tools and resource ids ``POST /v1/responses`` lets through.

Hosted tools run on the backend and are billed to the operator's upstream
key; resource ids (vector stores, containers, files, stored responses) reach
whatever that key can reach. Clients choose both per request, so the
operator's policy lives here and is enforced before any routing
(``protocol/doors/responses_tools.py``).

The type lists below are the wire contract: exact, lower-case type strings.
"""

from __future__ import annotations

from attrs import frozen

from switchyard.config import values
from switchyard.config.fields import field

ALLOW = "allow"
DENY = "deny"

# Executed by the client, never by the backend: always let through, whatever the
# lists say. ``tool_search`` joins them only with ``execution: "client"``.
ALWAYS_ALLOWED: tuple[str, ...] = ("function", "custom", "local_shell", "namespace")
TOOL_SEARCH = "tool_search"
CLIENT_EXECUTION = "client"

# Hosted types whose behaviour is known: they follow ``modeled_hosted_types``.
# Every other type (mcp, image_generation, server-side tool_search, ...)
# follows ``unmodeled_types``.
MODELED_HOSTED: tuple[str, ...] = (
    "web_search", "file_search", "code_interpreter", "computer_use", "programmatic_tool_calling",
)

# Tool types whose ``tools`` list holds member tools judged like top-level ones.
CONTAINERS: tuple[str, ...] = ("namespace", TOOL_SEARCH, "programmatic_tool_calling")

# The entries ``deny_resource_fields`` may name. The first two are the default;
# the other five have always been forwarded, and multi-turn clients resend them.
VECTOR_STORE_IDS = "vector_store_ids"
CONTAINER_IDS = "container_ids"
FILE_IDS = "file_ids"
PREVIOUS_RESPONSE_ID = "previous_response_id"
CONVERSATION = "conversation"
PROMPT = "prompt"
INPUT_ITEM_RESOURCE_IDS = "input_item_resource_ids"
RESOURCE_FIELDS: tuple[str, ...] = (
    VECTOR_STORE_IDS, CONTAINER_IDS, FILE_IDS, PREVIOUS_RESPONSE_ID, CONVERSATION, PROMPT,
    INPUT_ITEM_RESOURCE_IDS,
)
DEFAULT_RESOURCE_FIELDS: tuple[str, ...] = (VECTOR_STORE_IDS, CONTAINER_IDS)


def ascii_fold(text: str) -> str:
    """Lower-case A-Z only: ``deny`` matches in any ASCII case and nothing else
    (``str.lower`` would also fold non-ASCII look-alikes)."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


@frozen
class ResponsesTools:
    """One validated policy. ``allow`` matches exactly; ``deny`` in any ASCII case.

    The type lists are read by ``load_responses_tools``: they are checked against each other.
    """

    unmodeled_types: str = field(DENY, values.words(ALLOW, DENY))
    modeled_hosted_types: str = field(ALLOW, values.words(ALLOW, DENY))
    allow: frozenset[str] = frozenset()
    deny: frozenset[str] = frozenset()     # stored ASCII-folded
    deny_resource_fields: frozenset[str] = frozenset(DEFAULT_RESOURCE_FIELDS)
