"""SigV4 header signing against every case of AWS's published test suite (tests/data/aws_sigv4)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from switchyard.protocol.wires import aws_sigv4

SUITE = Path(__file__).parent.parent / "data" / "aws_sigv4"
CASES = sorted(p.name for p in SUITE.iterdir() if p.is_dir())


def _request(text: str) -> tuple[str, str, str, list[tuple[str, str]], bytes]:
    """request.txt: the request line, headers (a line starting with a space continues the value), body."""
    head, _, body = text.partition("\n\n")
    lines = head.split("\n")
    method, target = lines[0].split(" ", 1)
    target = target.rsplit(" ", 1)[0]
    path, _, query = target.partition("?")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line.startswith(" ") and headers:
            name, value = headers[-1]
            headers[-1] = (name, value + " " + line.strip())
        elif line:
            name, _, value = line.partition(":")
            headers.append((name, value))
    return method, path, query, headers, body.encode()


def _case(name: str) -> tuple[dict, tuple[str, str, str, list[tuple[str, str]], bytes]]:
    folder = SUITE / name
    return json.loads((folder / "context.json").read_text()), _request((folder / "request.txt").read_text())


def _sign(name: str) -> list[tuple[str, str]]:
    context, (method, path, query, headers, body) = _case(name)
    cred = context["credentials"]
    credentials = aws_sigv4.Credentials(cred["access_key_id"], cred["secret_access_key"], cred.get("token"))
    now = datetime.datetime.fromisoformat(context["timestamp"].replace("Z", "+00:00"))
    return aws_sigv4.sign(method, path, query, headers, body, credentials, context["region"], context["service"],
                          now, normalize=context["normalize"], sign_body=context["sign_body"],
                          sign_token=not context.get("omit_session_token", False))


def test_the_suite_is_present():
    assert len(CASES) >= 30


@pytest.mark.parametrize("name", CASES)
def test_canonical_request_matches_the_published_one(name):
    context, (method, path, query, headers, body) = _case(name)
    signed = dict(_sign(name))["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    added = [h for h in _sign(name) if h[0] in signed]
    got = aws_sigv4.canonical_request(method, path, query, [*headers, *added], body, context["normalize"])
    assert got == (SUITE / name / "header-canonical-request.txt").read_text()


@pytest.mark.parametrize("name", CASES)
def test_signature_matches_the_published_one(name):
    authorization = dict(_sign(name))["authorization"]
    expected = (SUITE / name / "header-signature.txt").read_text().strip()
    assert authorization.endswith(f"Signature={expected}")
