"""The Files API: ``POST``/``GET /v1/files``, ``GET``/``DELETE /v1/files/{id}``, ``GET /v1/files/{id}/content``.

The gateway keeps the Batch API's files (``actors/batches/service.py``):
input files a key uploads (purpose ``batch``, checked line by line at
upload) and the output and error files of its batches (``batch_output``).
The upload is a multipart form (``file`` and ``purpose``) bounded by
``batches.max_file_bytes``, not ``server.max_upload_bytes``: the body is
refused with a 413 as soon as its Content-Length, or the bytes read so far,
pass the bound (plus ``FORM_SLACK`` for the form around the file), before it
is read whole. Another key's file id answers exactly as an unknown one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from switchyard.actors.batches.records import INPUT, OUTPUT
from switchyard.actors.errors import BodyTooLarge, InvalidRequest
from switchyard.protocol.doors import batch_queries as q
from switchyard.protocol.doors.images import content_type
from switchyard.protocol.http.asgi import Receive, Scope, Send, read_body, respond
from switchyard.protocol.http.multipart import parse_form

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime
    from switchyard.config.schema import Snapshot
    from switchyard.protocol.doors.host import DoorHost
    from switchyard.protocol.http.gate import Identity

PATH = "/v1/files"
PREFIX = "/v1/files/"
_ITEM = re.compile(rf"/v1/files/{q.ID}(/content)?")
ACTIONS = {("GET", ""): "retrieve", ("DELETE", ""): "delete", ("GET", "/content"): "content"}
FORM_SLACK = 64 * 1024      # bytes of the form around the file (boundaries, part headers, purpose)
MAX_LIST = 10_000           # files one GET /v1/files answers (OpenAI's bound)
CONTENT_TYPE = b"application/octet-stream"   # what OpenAI answers GET .../content with


async def read_upload(scope: Scope, receive: Receive, snapshot: "Snapshot") -> bytes:
    """The upload's body, bounded by ``batches.max_file_bytes`` and the form's slack: a 413 naming the setting
    from the Content-Length, or as soon as the bytes read pass it."""
    q.served(snapshot, scope)
    bound = snapshot.batches.max_file_bytes
    try:
        return await read_body(scope, receive, bound + FORM_SLACK, snapshot.server)
    except BodyTooLarge as err:
        raise BodyTooLarge(f"{err.message}: a file takes at most {bound} bytes (batches.max_file_bytes), and its "
                           f"form {FORM_SLACK} more", param="file") from None


async def upload(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive, send: Send,
                 body: bytes) -> None:
    """``POST /v1/files``: the form's ``file`` kept, as the openai SDK's ``FileObject``."""
    q.served(runtime.snapshot, scope)
    fields, files = parse_form(body, content_type(scope))
    for name in fields:
        if name != "purpose":
            detail = "; this gateway keeps input files until they are deleted" if name.startswith("expires_after") \
                else ""
            raise InvalidRequest(f"{name}: not a field of this form (it takes file and purpose){detail}", param=name,
                                 code="unknown_parameter")
    purpose = fields.get("purpose")
    if not isinstance(purpose, str):
        raise InvalidRequest("purpose: is required (\"batch\")", param="purpose", code="missing_required_parameter")
    others = [f.field for f in files if f.field != "file"]
    if others:
        raise InvalidRequest(f"{others[0]}: the form takes its file in 'file' only", param=others[0],
                             code="unknown_parameter")
    if len(files) != 1:
        raise InvalidRequest("file: is required, once (a form part with a filename)" if not files else
                             f"file: one file per upload, got {len(files)}", param="file",
                             code="missing_required_parameter" if not files else "invalid_value")
    [sent] = files
    stored = await runtime.batches.upload(q.owner(runtime, who), sent.filename, purpose, sent.data)
    await q.answer(send, stored.body())


async def listing(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
                  send: Send) -> None:
    """``GET /v1/files``: the key's files, newest first unless ``order=asc``, a page of ``limit`` past ``after``."""
    q.served(runtime.snapshot, scope)
    params = q.query(scope, ("purpose", "limit", "order", "after"))
    purpose = q.one_of(params, "purpose", (INPUT, OUTPUT), None)
    limit = q.whole(params, "limit", 1, MAX_LIST, MAX_LIST)
    order = q.one_of(params, "order", ("asc", "desc"), "desc")
    page = await runtime.batches.files(q.owner(runtime, who), purpose, q.after(params), limit, order == "desc")
    await q.answer(send, q.list_body(page))


async def item(app: "DoorHost", runtime: "Runtime", who: "Identity", scope: Scope, receive: Receive,
               send: Send) -> None:
    """``GET``/``DELETE /v1/files/{id}`` and ``GET /v1/files/{id}/content``."""
    q.served(runtime.snapshot, scope)
    file_id, action = q.path_id(_ITEM, scope, ACTIONS)
    q.query(scope, ())
    owner, batches = q.owner(runtime, who), runtime.batches
    if action == "retrieve":
        await q.answer(send, (await batches.file(owner, file_id)).body())
    elif action == "delete":
        await batches.delete_file(owner, file_id)
        await q.answer(send, {"id": file_id, "object": "file", "deleted": True})
    else:
        await respond(send, 200, await batches.content(owner, file_id), [(b"content-type", CONTENT_TYPE)])
