"""The simulated backend's stored responses, as OpenAI keeps them, and its compaction endpoint.

Every Response object the simulator answers with (unless ``store: false``)
is kept, bounded, with its input items, so ``GET``/``DELETE
/v1/responses/{id}``, ``POST /v1/responses/{id}/cancel`` and ``GET
/v1/responses/{id}/input_items`` answer like OpenAI's API, and a
``previous_response_id`` it does not hold is OpenAI's 400 (``previous_response_not_found``), and so is a
``function_call_output`` answering no call made before it. A ``background:
true`` request is answered at once, ``in_progress``, and stays so until
cancelled. ``POST /v1/responses/compact`` answers a ``response.compaction``
object: the user messages of the input, then one compaction item.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from switchyard.protocol.simulated.parts import Simulator

KEEP = 10_000   # responses a simulator keeps; the oldest goes first
PREFIX = "/v1/responses/"


def _store(owner: "Simulator") -> "OrderedDict[str, dict[str, Any]]":
    return owner.stored_responses


def keep(owner: "Simulator", response: dict[str, Any], body: dict[str, Any]) -> None:
    """Store ``response`` (the object as answered) with its request's input items, unless ``store: false``."""
    if body.get("store") is False:
        return
    store = _store(owner)
    store[response["id"]] = {"response": response, "input": input_items(body.get("input"), response["id"])}
    while len(store) > KEEP:
        store.popitem(last=False)


def holds(owner: "Simulator", response_id: str) -> bool:
    return response_id in _store(owner)


def _error(status: int, message: str, param: str | None = None, code: str | None = None) -> httpx.Response:
    return httpx.Response(status, json={"error": {"message": message, "type": "invalid_request_error",
                                                  "param": param, "code": code}})


def unknown_previous(owner: "Simulator", body: dict[str, Any]) -> httpx.Response | None:
    """OpenAI's 400 for a ``previous_response_id`` this backend does not hold, else None."""
    previous = body.get("previous_response_id")
    if isinstance(previous, str) and not holds(owner, previous):
        return _error(400, f"Previous response with id '{previous}' not found.", "previous_response_id",
                      "previous_response_not_found")
    return None


def unmatched_call_output(owner: "Simulator", body: dict[str, Any]) -> httpx.Response | None:
    """OpenAI's 400 for a ``function_call_output`` whose ``call_id`` no earlier ``function_call`` made (in the
    input, or in the stored responses ``previous_response_id`` chains back to), else None."""
    items = body.get("input")
    if not isinstance(items, list):
        items = []
    calls = _chain_calls(owner, body.get("previous_response_id"))
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            calls.add(item.get("call_id"))
        elif item.get("type") == "function_call_output" and item.get("call_id") not in calls:
            return _error(400, f"No tool call found for function call output with call_id {item.get('call_id')}.",
                          "input")
    return None


def _chain_calls(owner: "Simulator", previous: Any) -> set[Any]:
    """The call ids of the function calls in a stored chain of responses (their inputs and outputs)."""
    calls: set[Any] = set()
    store, seen = _store(owner), set()
    while isinstance(previous, str) and previous in store and previous not in seen:
        seen.add(previous)
        entry = store[previous]
        calls.update(i.get("call_id") for i in [*entry["input"], *entry["response"]["output"]]
                     if isinstance(i, dict) and i.get("type") == "function_call")
        previous = entry["response"].get("previous_response_id")
    return calls


def input_items(value: Any, response_id: str) -> list[dict[str, Any]]:
    """The input as the items OpenAI lists: messages with ids and typed content parts."""
    items = [{"role": "user", "content": value}] if isinstance(value, str) else value if isinstance(value, list) else []
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        item = dict(item)
        item.setdefault("type", "message")
        item.setdefault("id", f"msg_{response_id}_{i}")
        if item["type"] == "message":
            item.setdefault("status", "completed")
            if isinstance(item.get("content"), str):
                kind = "output_text" if item.get("role") == "assistant" else "input_text"
                item["content"] = [{"type": kind, "text": item["content"]}]
            if isinstance(item.get("content"), list):   # an assistant's text as OpenAI lists it back
                item["content"] = [{"annotations": [], "logprobs": [], **part}
                                   if isinstance(part, dict) and part.get("type") == "output_text" else part
                                   for part in item["content"]]
        out.append(item)
    return out


async def serve(owner: Any, request: httpx.Request) -> httpx.Response:
    """Any path under ``/v1/responses/`` of the simulator (a ``SimulatedTransport``): compaction arrives like
    a Responses call (its script, latency, scripted failures); the stored-response routes answer at once."""
    if request.method == "POST" and request.url.path.endswith("/responses/compact"):
        failed: httpx.Response | None   # the simulator's (openai.py)
        sim, body, _, failed = await owner._arrive(request)
        if failed is not None:
            return failed
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return _error(400, "'model' is required and must be a string", "model")
        return compaction(owner, body)
    return answer(owner, request)


def answer(owner: "Simulator", request: httpx.Request) -> httpx.Response:
    """A stored-response route: retrieve, delete, cancel or list input items."""
    rest = request.url.path.split(PREFIX, 1)[1]
    response_id, _, action = rest.partition("/")
    entry = _store(owner).get(response_id)
    method = request.method
    if (method, action) not in {("GET", ""), ("DELETE", ""), ("POST", "cancel"), ("GET", "input_items")}:
        return httpx.Response(404, json={"error": {"message": f"no route {request.url.path}",
                                                   "type": "not_found_error", "param": None, "code": None}})
    owner.record(f"stored:{method} {action or 'response'}")
    if entry is None:
        return _error(404, f"Response with id '{response_id}' not found.")
    response = entry["response"]
    if method == "DELETE":
        del _store(owner)[response_id]
        return httpx.Response(200, json={"id": response_id, "object": "response.deleted", "deleted": True})
    if action == "cancel":
        if response["status"] not in ("queued", "in_progress"):
            return _error(400, "Only responses created with background=true that are still in progress can be "
                               "cancelled.")
        entry["response"] = response = {**response, "status": "cancelled"}
        return httpx.Response(200, json=response)
    if action == "input_items":
        return httpx.Response(200, json=_listing(entry["input"], request.url.params))
    if request.url.params.get("stream") == "true":
        event = {"type": "response.completed" if response["status"] == "completed" else "response.in_progress",
                 "sequence_number": 0, "response": response}
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
    return httpx.Response(200, json=response)


def _listing(items: list[dict[str, Any]], params: httpx.QueryParams) -> dict[str, Any]:
    """A page of input items: ``order`` (default desc, as OpenAI's), ``after``, ``limit`` (default 20)."""
    ordered = list(reversed(items)) if params.get("order", "desc") == "desc" else list(items)
    after = params.get("after")
    if after is not None:
        ids = [i["id"] for i in ordered]
        ordered = ordered[ids.index(after) + 1:] if after in ids else []
    limit = int(params.get("limit", "20"))
    page = ordered[:limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(ordered) > limit}


def compaction(owner: "Simulator", body: dict[str, Any]) -> httpx.Response:
    """``POST /v1/responses/compact``: the user messages of the input (after the previous response's), then one
    compaction item."""
    refused = unknown_previous(owner, body)
    if refused is not None:
        return refused
    items: list[dict[str, Any]] = []
    previous = body.get("previous_response_id")
    if isinstance(previous, str):
        items += _store(owner)[previous]["input"]
    rid = response_id(owner).replace("resp_", "resp_cmp_", 1)
    items += input_items(body.get("input"), rid)
    users = [i for i in items if i.get("type") == "message" and i.get("role") == "user"]
    prompt = max(1, len(json.dumps(items)) // 4)
    owner.record("compacted")
    return httpx.Response(200, json={
        "id": rid, "object": "response.compaction", "created_at": int(time.time()),
        "output": [*users, {"id": f"cmp_{rid}", "type": "compaction", "encrypted_content": f"sim:{len(items)}",
                            "created_by": getattr(owner, "name", "sim")}],
        "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens": 8,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + 8}})


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def response_id(owner: "Simulator") -> str:
    """A new Response id, unique across the simulators of one gateway (each has its own name). Counted on its
    own: ``served`` counts arrivals, and requests answered at once would share it."""
    owner.response_ids += 1
    number = owner.response_ids
    return f"resp_{_safe(getattr(owner, 'name', 'sim'))}_{number}"
