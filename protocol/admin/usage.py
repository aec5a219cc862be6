"""``GET /admin/usage``, ``/admin/usage.csv`` and ``/admin/usage/requests/{request_id}``: the usage
ledger, totalled or listed, read through the ledger's ``UsageReader``.

The parameters and their rules are ``usage_query``'s; how rows look outside
is ``usage_format``'s. The reader runs the store's blocking queries in a
worker thread, so a long report never holds the event loop; a CSV listing is
sent in pieces as it is written.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

import trio

from switchyard.actors.errors import InvalidRequest, MethodNotAllowed, RouteNotFound, Unavailable
from switchyard.actors.ledger.record import CALLS, LedgerRecord, StoreUnavailable, UsageQuery
from switchyard.protocol.admin.usage_format import RECORD_COLUMNS, csv_chunks, group_columns, record_view
from switchyard.protocol.admin.usage_query import (
    QUERY_PARAMS,
    QueryError,
    parse_limit,
    parse_query,
    query_pairs,
    single_values,
)

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

Respond = Callable[..., Awaitable[None]]

REQUEST_PREFIX = "/admin/usage/requests/"
CSV_TYPE = b"text/csv; charset=utf-8"


class UsageReader(Protocol):
    """The ledger's read side (the LedgerActor): the store's queries of the same names, off the loop.
    Each may raise ``StoreUnavailable``."""

    async def summary(self, query: UsageQuery) -> list[dict[str, Any]]: ...

    async def traffic(self, query: UsageQuery, step: int) -> list[dict[str, Any]]: ...

    async def records(self, query: UsageQuery, limit: int) -> list[LedgerRecord]: ...

    async def for_request(self, request_id: str) -> list[LedgerRecord]: ...


def usage_reader(runtime: "Runtime") -> UsageReader:
    """The running ledger's read side (``runtime.ledger``, the LedgerActor)."""
    return runtime.ledger


class UsageAdmin:
    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.routes = {"/admin/usage": {"GET": self.summary}, "/admin/usage.csv": {"GET": self.csv}}

    async def summary(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        """``{"groups": [...]}``: the totals of the matching records, one row per group (one without
        ``group_by``), as the store gives them."""
        query, _ = _query(scope, QUERY_PARAMS)
        groups = await ask(runtime, lambda reader: reader.summary(query))
        await self.respond(send, 200, json.dumps({"groups": groups}).encode())

    async def csv(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        """The same as CSV: one row per group with ``group_by``, else one per record (oldest first,
        at most ``limit``)."""
        query, limit = _query(scope, (*QUERY_PARAMS, "limit"))
        if query.group_by is not None:
            groups = await ask(runtime, lambda reader: reader.summary(query))
            pieces = csv_chunks(group_columns(query.group_by), groups)
        else:
            records = await ask(runtime, lambda reader: reader.records(query, limit))
            pieces = csv_chunks(RECORD_COLUMNS, (record_view(r) for r in records))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", CSV_TYPE),
                                (b"content-disposition", b'attachment; filename="usage.csv"')]})
        for piece in pieces:
            await send({"type": "http.response.body", "body": piece.encode(), "more_body": True})
            await trio.lowlevel.checkpoint()   # the next piece waits its turn behind the other tasks
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def one_request(self, runtime: "Runtime", scope: Any, send: Any) -> None:
        """The client record of one request id, and its classifier tries under ``classifier``."""
        if scope["method"] != "GET":
            raise MethodNotAllowed(f"{scope['method']} is not allowed on {scope['path']}", allowed=("GET",))
        request_id = scope["path"][len(REQUEST_PREFIX):]
        records = await ask(runtime, lambda reader: reader.for_request(request_id))
        # a model call's record, or a /mcp tool call's (purpose mcp: docs/mcp.md)
        client = [r for r in records if r.purpose in CALLS] or [r for r in records if r.purpose == "mcp"]
        if not client:
            raise RouteNotFound(f"No usage record for request id '{request_id}' (the ledger keeps "
                                "usage.retention; a call's record arrives within usage.flush_interval of its end)",
                                code="usage_record_not_found")
        body = {**record_view(client[0]),
                "classifier": [record_view(r) for r in records if r.purpose == "classifier"]}
        await self.respond(send, 200, json.dumps(body).encode())


async def kept_route_events(runtime: "Runtime", request_id: str) -> dict[str, Any] | None:
    """The route events the ledger kept for ``request_id`` (every call but one clean attempt); None when it has
    none. 503 when its store cannot answer."""
    records = await ask(runtime, lambda reader: reader.for_request(request_id))
    for rec in records:
        if rec.purpose in CALLS and rec.route_events is not None:
            events: dict[str, Any] = json.loads(rec.route_events)   # a trace's as_dict() (ledger/entries.py)
            return events
    return None


def _query(scope: Any, allowed: tuple[str, ...]) -> tuple[UsageQuery, int]:
    """The query string's UsageQuery and ``limit``; a 400 naming the parameter when one breaks its rule."""
    try:
        params = single_values(query_pairs(scope.get("query_string", b"")), allowed)
        return parse_query(params), parse_limit(params.get("limit"))
    except QueryError as exc:
        raise InvalidRequest(str(exc), param=exc.param, code=exc.code) from None


async def ask(runtime: "Runtime", question: Callable[[UsageReader], Awaitable[Any]]) -> Any:
    """The reader's answer; 503 when the ledger's store cannot answer (every ledger route says so alike)."""
    try:
        return await question(usage_reader(runtime))
    except StoreUnavailable as exc:
        raise Unavailable(f"The usage ledger's store is unavailable: {exc}", code="usage_ledger_unavailable"
                          ) from None
