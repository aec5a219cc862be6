"""Fake web-search providers speaking their documented JSON, as one ASGI app: SearXNG's
``GET /searxng/search?q=...&format=json``, Brave's ``GET /brave/res/v1/web/search`` (``X-Subscription-Token``)
and Tavily's ``POST /tavily/search`` (``Authorization: Bearer``). Served on a loopback port by hypercorn
(``tests/servers.py``'s ``serving``) for end-to-end tests, or in-process through ``httpx.ASGITransport`` under
MockClock. Each provider answers as scripted in ``modes``: ``ok``, ``500``/``401``/... (that status),
``garbage`` (a 200 that is not JSON), ``wrong`` (JSON of another shape), ``slow`` (an answer after ``slow_for``
seconds); every request is kept in ``seen`` as (provider, query)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

import httpx
import trio

from tests.servers import lifespan, request_body

KEYS = {"brave": "brave-key", "tavily": "tvly-key"}
RESULTS = [("Trio docs", "https://trio.readthedocs.io/en/stable/", "Trio is an async library"),
           ("Switchyard", "https://docs.example.org/switchyard", "An <strong>LLM</strong> gateway &amp; router"),
           ("Spam", "https://spam.example.net/page", "Buy now")]


class FakeSearch:
    def __init__(self) -> None:
        self.modes: dict[str, str] = {"searxng": "ok", "brave": "ok", "tavily": "ok"}
        self.results: list[tuple[str, str, str]] = list(RESULTS)
        self.slow_for = 60.0
        self.seen: list[tuple[str, str]] = []

    def endpoints(self, base: str) -> dict[str, str]:
        """Each provider's ``endpoint`` under ``base`` (the app's URL)."""
        return {"searxng": f"{base}/searxng", "brave": f"{base}/brave/res/v1/web/search",
                "tavily": f"{base}/tavily/search"}

    def client(self) -> httpx.AsyncClient:
        """An in-process client to this app (MockClock tests: no socket)."""
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await request_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path, query = scope["path"], parse_qs(scope["query_string"].decode())
        if path == "/searxng/search" and query.get("format") == ["json"]:
            provider, asked = "searxng", query.get("q", [""])[0]
        elif path == "/brave/res/v1/web/search":
            provider, asked = "brave", query.get("q", [""])[0]
            if headers.get("x-subscription-token") != KEYS["brave"]:
                await _answer(send, 401, {"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}})
                return
        elif path == "/tavily/search" and scope["method"] == "POST":
            provider, asked = "tavily", json.loads(body or b"{}").get("query", "")
            if headers.get("authorization") != f"Bearer {KEYS['tavily']}":
                await _answer(send, 401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})
                return
        else:
            await _answer(send, 404, {"error": "not found"})
            return
        self.seen.append((provider, asked))
        mode = self.modes[provider]
        if mode == "slow":
            await trio.sleep(self.slow_for)
        if mode.isdigit():
            await _answer(send, int(mode), {"error": "scripted failure"})
        elif mode == "garbage":
            await _raw(send, 200, b"<html>rate limited</html>")
        elif mode == "wrong":
            await _answer(send, 200, {"items": []})
        else:
            await _answer(send, 200, self.answer(provider, asked))

    def answer(self, provider: str, query: str) -> dict[str, Any]:
        if provider == "searxng":
            return {"query": query, "number_of_results": len(self.results), "answers": [], "suggestions": [],
                    "results": [{"url": u, "title": t, "content": s, "engine": "fake", "score": 1.0}
                                for t, u, s in self.results]}
        if provider == "brave":
            return {"type": "search", "query": {"original": query},
                    "web": {"type": "search", "results": [{"type": "search_result", "title": t, "url": u,
                                                           "description": s} for t, u, s in self.results]}}
        return {"query": query, "answer": None, "images": [], "response_time": 0.5,
                "results": [{"title": t, "url": u, "content": s, "score": 0.9, "raw_content": None}
                            for t, u, s in self.results]}


async def _answer(send: Any, status: int, payload: Any) -> None:
    await _raw(send, status, json.dumps(payload).encode())


async def _raw(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
