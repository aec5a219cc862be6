"""Which MCP tools a caller reaches (``actors/routing/mcp_tools.py``): names, and the key's and the
organization's allowlists, each of which has to allow."""

import pytest

from switchyard.actors.routing.mcp_tools import allows, public_name, split_name
from switchyard.config.access import ApiKey
from switchyard.config.limits import Organization


def test_a_public_name_splits_at_the_first_separator_back_into_a_known_server_and_its_tool():
    assert public_name("github", "search__code") == "github__search__code"
    assert split_name("github__search__code", {"github"}) == ("github", "search__code")
    assert split_name("gitlab__search", {"github"}) is None
    assert split_name("github__", {"github"}) is None and split_name("github", {"github"}) is None


def key(**lists: tuple[str, ...]) -> ApiKey:
    return ApiKey(id="k", key="", **lists)


@pytest.mark.parametrize(("caller", "org", "server", "tool", "allowed"), [
    (None, None, "gh", "search", True),                                      # an open data plane
    (key(), None, "gh", "search", True),                                     # no lists: every tool
    (key(allowed_mcp_servers=("gh",)), None, "files", "read", False),
    (key(allowed_mcp_servers=("g*",)), None, "gh", "search", True),
    (key(allowed_mcp_tools=("gh__search",)), None, "gh", "delete", False),   # the public name is judged
    (key(allowed_mcp_tools=("*__search",)), None, "files", "search", True),
    (key(), Organization(id="o", allowed_mcp_servers=("files",)), "gh", "search", False),   # the org narrows
    (key(allowed_mcp_tools=("gh__*",)), Organization(id="o", allowed_mcp_tools=("*__search",)), "gh", "search",
     True),
    (key(allowed_mcp_tools=("gh__*",)), Organization(id="o", allowed_mcp_tools=("*__search",)), "gh", "push",
     False),
])
def test_the_key_and_its_organization_must_both_allow_a_tool(caller, org, server, tool, allowed):
    assert allows(caller, org, server, tool) is allowed
