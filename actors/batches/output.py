"""A gateway-run batch's output: each finished line's result, and the output and error files made of them.

The shapes are OpenAI's Batch API's, so the openai SDK and any code written
against OpenAI reads them unchanged: one JSON object per line,
``{"id": "batch_req_...", "custom_id", "response": {"status_code",
"request_id", "body"}, "error": null}``; a line the window closed on before
it ran has ``"response": null`` and ``"error": {"code": "batch_expired",
...}``. A 2xx answer makes a done line (the output file), anything else an
error line (the error file): a client's mistake in one line never fails the
batch. Pure: the runner does the store's I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

import attrs

from switchyard.actors import safe_text
from switchyard.actors.batches.lines import LineAnswer
from switchyard.actors.batches.records import DONE, ERROR, OUTPUT, Batch, Line, StoredFile
from switchyard.actors.ids import random_hex

EXPIRED = {"code": "batch_expired",
           "message": "This request could not be executed before the completion window expired."}


def answered(line: Line, answer: LineAnswer) -> Line:
    """``line`` finished with the door's ``answer``: done for a 2xx, error otherwise."""
    response = {"status_code": answer.status, "request_id": answer.request_id, "body": _json(answer.body)}
    status = DONE if 200 <= answer.status < 300 else ERROR
    return attrs.evolve(line, status=status, result=_result(line, response, None))


def expired(line: Line) -> Line:
    """``line`` never ran: the batch's completion window closed first."""
    return attrs.evolve(line, status=ERROR, result=_result(line, None, EXPIRED))


def files(batch: Batch, done: Sequence[Line], failed: Sequence[Line], now: float,
          retention: float) -> tuple[Batch, list[tuple[StoredFile, bytes]]]:
    """The output file (``done``'s results) and the error file (``failed``'s), each in line order and only
    when it has a line, as ``batch_output`` files of the batch's owner kept ``retention`` seconds, named as
    OpenAI names them (``batch_<24 hex>_output.jsonl``); and ``batch`` naming them."""
    made: list[tuple[StoredFile, bytes]] = []
    ids: dict[str, str | None] = {"output": None, "error": None}
    for kind, lines in (("output", done), ("error", failed)):
        if not lines:
            continue
        ordered = sorted(lines, key=lambda line: line.number)
        content = "".join(f"{line.result}\n" for line in ordered).encode()
        file = StoredFile(id=file_id(batch.id, kind), owner=batch.owner, purpose=OUTPUT,
                          filename=f"{batch.id}_{kind}.jsonl", bytes=len(content), created_at=now,
                          expires_at=now + retention)
        ids[kind] = file.id
        made.append((file, content))
    return attrs.evolve(batch, output_file_id=ids["output"], error_file_id=ids["error"]), made


def file_id(batch_id: str, kind: str) -> str:
    """A batch's output or error file's id, the same whichever worker writes it: a finalize begun by a worker
    whose lease lapsed and done again by the next one leaves one file, not two."""
    return "file-" + hashlib.sha256(f"{batch_id}:{kind}".encode()).hexdigest()[:24]


def _result(line: Line, response: dict[str, Any] | None, error: dict[str, str] | None) -> str:
    """The output line's JSON text, UTF-8 encodable: an answer may carry a lone surrogate (``"\\ud800"``, valid
    JSON), which no store can write as text, so such a line keeps it as its escape."""
    result = {"id": "batch_req_" + random_hex(12), "custom_id": line.custom_id, "response": response, "error": error}
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    return text if safe_text.is_clean(text) else json.dumps(result, separators=(",", ":"))


def _json(body: bytes) -> Any:
    """The answer's JSON; a body that is not JSON (no batchable door answers one) as its text."""
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")
