"""Role credential endpoints on a real socket (127.0.0.1): the container credentials endpoint and
IMDSv2, as AWS documents them, for the credential sources' tests.

Container: ``GET {path}`` with the ``Authorization`` token when one is set,
answering ``{AccessKeyId, SecretAccessKey, Token, Expiration}``. IMDSv2:
``PUT /latest/api/token`` (``x-aws-ec2-metadata-token-ttl-seconds``) gives
a token every other request must carry as ``x-aws-ec2-metadata-token``;
``GET /latest/meta-data/iam/security-credentials/`` names the role, and
``.../{role}`` answers the same document. Each answer issues the next of
``keys`` (``AKID1``, ``AKID2``, ...) so a refresh is visible.
"""

from __future__ import annotations

import datetime
import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from tests.servers import lifespan, request_body, serving

ROLE = "gateway-role"
IMDS_TOKEN = "imds-token-1"


class FakeCredentialEndpoints:
    def __init__(self, token: str | None = None, lifetime: float = 3600.0) -> None:
        self.token = token            # the container endpoint's authorization token
        self.lifetime = lifetime      # seconds each issued credential is valid
        self.issued = 0
        self.fail = False             # answer 500 to credential requests
        self.requests: list[tuple[str, str]] = []
        self.url = ""

    def document(self) -> dict[str, Any]:
        self.issued += 1
        expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self.lifetime)
        return {"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": f"AKID{self.issued}",
                "SecretAccessKey": f"secret{self.issued}", "Token": f"token{self.issued}",
                "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        await request_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        self.requests.append((method, path))
        status, body = self.answer(method, path, headers)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json" if body.startswith("{") else b"text/plain")]})
        await send({"type": "http.response.body", "body": body.encode()})

    def answer(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, str]:
        if path == "/latest/api/token" and method == "PUT":
            return (200, IMDS_TOKEN) if headers.get("x-aws-ec2-metadata-token-ttl-seconds") else (400, "no ttl")
        if path.startswith("/latest/"):
            if headers.get("x-aws-ec2-metadata-token") != IMDS_TOKEN:
                return 401, "unauthorized"
            if path == "/latest/meta-data/iam/security-credentials/":
                return 200, ROLE
            if path == f"/latest/meta-data/iam/security-credentials/{ROLE}":
                return (500, "broken") if self.fail else (200, json.dumps(self.document()))
            return 404, "not found"
        if path == "/creds" and method == "GET":
            if self.token is not None and headers.get("authorization") != self.token:
                return 403, json.dumps({"message": "bad token"})
            return (500, "broken") if self.fail else (200, json.dumps(self.document()))
        return 404, "not found"


@asynccontextmanager
async def running(fake: FakeCredentialEndpoints) -> AsyncIterator[FakeCredentialEndpoints]:
    async with serving(fake) as url:
        fake.url = url
        yield fake
