"""The ``mcp_servers`` section and the keys' ``/mcp`` allowlists: what loads, and every bad value refused
with its field path."""

from switchyard.config.load import load_text
from switchyard.protocol.serving.cli import main
from tests.unit.test_config import MINIMAL, errors_of


def test_a_stdio_and_an_http_server_load_with_their_defaults_and_credentials_from_the_environment():
    text = MINIMAL + """
mcp_servers:
  - {name: files, command: /usr/bin/mcp-files, args: [--root, /srv], env: {TOKEN: "${FILES_TOKEN}"}}
  - {name: github, url: "https://mcp.example.com/mcp", headers: {authorization: "Bearer ${GH_TOKEN}"},
     forward_headers: [X-Team], timeout: 5s, max_result_bytes: 64KiB}
"""
    files, github = load_text(text, env={"FILES_TOKEN": "f", "GH_TOKEN": "g"}).snapshot.mcp_servers
    assert (files.stdio, files.args, files.env, files.timeout, files.max_result_bytes) == (
        True, ("--root", "/srv"), (("TOKEN", "f"),), 30.0, 1024 * 1024)
    assert (github.stdio, github.headers, github.forward_headers, github.timeout, github.max_result_bytes) == (
        False, (("authorization", "Bearer g"),), ("x-team",), 5.0, 65536)


def test_bad_servers_are_refused_with_their_field_paths():
    errors = "\n".join(errors_of(MINIMAL + """
mcp_servers:
  - {name: a__b, url: "http://x/mcp"}
  - {name: both, url: "http://x/mcp", command: run}
  - {name: neither}
  - {name: leak, url: "http://x/mcp", forward_headers: [Authorization]}
  - {name: pipe, command: run, headers: {x-a: b}}
  - {name: pipe, url: "http://x/mcp", args: [x], timeout: 0}
  - {url: "http://x/mcp"}
""", env={}))
    assert "mcp_servers[0].name: must not hold '__'" in errors
    assert "mcp_servers[1].command: and url are exclusive" in errors
    assert "mcp_servers[2]: needs url (Streamable HTTP) or command (a stdio subprocess)" in errors
    assert "mcp_servers[3].forward_headers: must not name 'authorization'" in errors
    assert "mcp_servers[4].headers: only applies to a Streamable HTTP server" in errors
    assert "mcp_servers[5].args: only applies to a stdio server" in errors
    assert "mcp_servers[5].timeout: must be greater than zero" in errors
    assert "mcp_servers[5].name: duplicate server name 'pipe' (also mcp_servers[4])" in errors
    assert "mcp_servers[6].name: is required" in errors


def test_keys_and_organizations_take_mcp_allowlists_and_refuse_an_empty_one():
    text = MINIMAL + """
api_keys:
  - {id: a, key: "0123456789abcdef0123", organization_id: o, allowed_mcp_servers: [gh*],
     allowed_mcp_tools: ["github__search_*"]}
organizations:
  - {id: o, allowed_mcp_tools: ["*__search_code"]}
"""
    snap = load_text(text, env={}).snapshot
    [key] = snap.api_keys.keys
    assert (key.allowed_mcp_servers, key.allowed_mcp_tools) == (("gh*",), ("github__search_*",))
    assert snap.organizations["o"].allowed_mcp_tools == ("*__search_code",)
    errors = "\n".join(errors_of(MINIMAL + """
api_keys:
  - {id: a, key: "0123456789abcdef0123", allowed_mcp_servers: []}
""", env={}))
    assert "api_keys[0].allowed_mcp_servers: must not be empty" in errors


def test_config_validate_warns_of_an_allowed_mcp_server_that_is_not_configured(tmp_path, capsys):
    path = tmp_path / "switchyard.yaml"
    path.write_text(MINIMAL + """
mcp_servers:
  - {name: github, url: "https://mcp.example.com/mcp"}
api_keys:
  - {id: a, key: "0123456789abcdef0123", allowed_mcp_servers: [github, gitlab, "files*"]}
organizations:
  - {id: o, allowed_mcp_servers: ["git[hl]*", githib]}
""")
    assert main(["config", "validate", str(path)]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: api_keys[0].allowed_mcp_servers[1]: key 'a': no server of mcp_servers is named 'gitlab', so this "
        "entry allows nothing",
        "warning: organizations[0].allowed_mcp_servers[1]: organization 'o': no server of mcp_servers is named "
        "'githib', so this entry allows nothing"]
