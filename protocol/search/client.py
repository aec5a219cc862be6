"""The ``SearchApi`` the actors use: one provider's search over the gateway's shared HTTP client.

No time limit here: the executor's cancel scope (``web_search.timeout`` and
the call's budget) bounds each search. Every way a provider can fail (the
transport, a status other than 200, a body too large or not its JSON) is one
``SearchFailed`` whose message names the failure, never the key. A
``simulated`` provider sends nothing: it answers from the process
(``protocol/simulated/search.py``).
"""

from __future__ import annotations

import json

import httpx

from switchyard.actors.search.hits import Hit, SearchFailed
from switchyard.config.web_search import SearchProvider
from switchyard.protocol.search.providers import ask, hits
from switchyard.protocol.simulated.search import simulated_search

BODY_LIMIT = 2 * 1024 * 1024   # bytes of one answer read at most


class ProviderSearch:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def search(self, provider: SearchProvider, query: str, count: int) -> list[Hit]:
        if provider.type == "simulated":
            return await simulated_search(provider, query, count)
        a = ask(provider, query, count)
        request = self.client.build_request(a.method, a.url, params=a.params, headers=a.headers, json=a.json)
        try:
            response = await self.client.send(request, stream=True)
            try:
                if response.status_code != 200:
                    raise SearchFailed(f"answered HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > BODY_LIMIT:
                        raise SearchFailed(f"answered more than {BODY_LIMIT} bytes")
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise SearchFailed(f"could not be reached ({type(exc).__name__})") from None
        try:
            answer = json.loads(body)
        except ValueError:
            raise SearchFailed("answered with a body that is not JSON") from None
        return hits(provider, answer, count)
