"""What the simulated backend answers on ``/v1/rerank`` (and ``/rerank``) and ``/v1/moderations``.

Both are deterministic, so a test (or the demo) knows the answer before it
asks. A rerank scores each document by word overlap with the query: the
share of the query's distinct lower-cased words the document holds; results
run from the best score down (ties by index), ``top_n`` of them, each with
its ``document`` unless ``return_documents`` is false, in the shape vLLM,
Jina and Cohere share, with ``usage.total_tokens`` and Cohere's
``meta.billed_units.search_units``. A moderation flags an input holding one
of ``simulation.moderation_words`` in ``simulation.moderation_category``.
"""

from __future__ import annotations

import json
import re
from typing import Any, AsyncIterator

import httpx

from switchyard.config.simulation import Simulation
from switchyard.protocol.simulated.parts import SimulatedStream, Simulator

PATHS = ("/rerank", "/moderations")
CATEGORIES = ("harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
              "self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence",
              "violence/graphic")
_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def overlap(query: str, document: str) -> float:
    """A document's simulated relevance: the share of the query's words it holds (0 for an empty query)."""
    asked = words(query)
    return len(asked & words(document)) / len(asked) if asked else 0.0


def _text(document: Any) -> str:
    return document.get("text", "") if isinstance(document, dict) else str(document)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def rerank_body(model: str, body: dict[str, Any], served: int) -> dict[str, Any]:
    query = str(body.get("query", ""))
    texts = [_text(d) for d in body.get("documents") or ()]
    ranked = sorted(range(len(texts)), key=lambda i: (-overlap(query, texts[i]), i))
    top_n = body.get("top_n")
    keep = ranked[:top_n] if isinstance(top_n, int) and top_n > 0 else ranked
    show = body.get("return_documents") is not False
    results = [{"index": i, "relevance_score": overlap(query, texts[i]),
                **({"document": {"text": texts[i]}} if show else {})} for i in keep]
    tokens = sum(_tokens(query) + _tokens(t) for t in texts)
    return {"id": f"rerank-sim-{served}", "model": model, "results": results, "usage": {"total_tokens": tokens},
            "meta": {"billed_units": {"search_units": -(-len(texts) // 100)}}}


def _moderated(sim: Simulation, text: str) -> dict[str, Any]:
    flagged = bool(words(text) & {w.lower() for w in sim.moderation_words})
    hit = {c: flagged and c == sim.moderation_category for c in CATEGORIES}
    return {"flagged": flagged, "categories": hit, "category_scores": {c: 1.0 if v else 0.0 for c, v in hit.items()},
            "category_applied_input_types": {c: ["text"] for c in CATEGORIES}}


def moderation_body(sim: Simulation, model: str, body: dict[str, Any], served: int) -> dict[str, Any]:
    value = body.get("input")
    items = value if isinstance(value, list) else [value]
    if items and isinstance(items[0], dict):   # parts: the text parts, read as one input
        items = [" ".join(str(p.get("text", "")) for p in items if isinstance(p, dict))]
    return {"id": f"modr-sim-{served}", "model": model, "results": [_moderated(sim, str(t)) for t in items]}


def answer(owner: "Simulator", sim: Simulation, path: str, body: dict[str, Any]) -> httpx.Response:
    """The 200 answer for a rerank or moderations request, sent whole."""
    model = str(body.get("model", ""))
    made = rerank_body(model, body, owner.served) if path.endswith("/rerank") else \
        moderation_body(sim, model, body, owner.served)

    async def chunks() -> AsyncIterator[bytes]:
        owner.record("completed")
        yield json.dumps(made).encode()
    return httpx.Response(200, headers={**sim.response_headers, "content-type": "application/json"},
                          stream=SimulatedStream(owner, chunks()))
