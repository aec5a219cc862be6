"""A refusal answered before the request's body was read closes the connection, and says so: the server does
not keep a connection whose body it did not read, and a client reusing it would find it gone."""

import json

from tests.harness import chat, gateway, request

CONFIG = """
health_checks: {interval: 1h}
usage: {ledger: memory}
backends:
  - {name: a, type: simulated, models: [demo]}
api_keys:
  - {id: team, key: sk-team-0123456789abcdef}
"""
BODY = json.dumps(chat()).encode()


def headers(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {key}".encode()), (b"content-length", str(len(BODY)).encode())]


async def test_a_key_refused_before_the_body_is_read_says_connection_close(autojump_clock):
    async with gateway(CONFIG) as app:
        reply = await request(app, "POST", "/v1/chat/completions", BODY, headers("sk-wrong-0123456789abcdef"))
        assert reply.status == 401 and reply.headers.get(b"connection") == b"close"


async def test_an_answer_after_the_whole_body_keeps_the_connection(autojump_clock):
    async with gateway(CONFIG) as app:
        ok = await request(app, "POST", "/v1/chat/completions", BODY, headers("sk-team-0123456789abcdef"))
        refused = await request(app, "POST", "/v1/chat/completions", json.dumps(chat(model="nope")).encode(),
                                headers("sk-team-0123456789abcdef"))
        bodiless = await request(app, "GET", "/v1/models", None, [(b"authorization", b"Bearer sk-wrong")])
        assert (ok.status, refused.status, bodiless.status) == (200, 404, 401)
        assert b"connection" not in ok.headers and b"connection" not in refused.headers
        assert b"connection" not in bodiless.headers
