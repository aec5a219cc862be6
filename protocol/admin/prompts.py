"""``/admin/config/prompts``: list, read, write and reload the global prompt files.

Thin HTTP glue over ``runtime.prompts`` (actors/prompts.py): the store and the
sandbox decide, this module turns a broken rule into the matching error
class and code. Disk I/O runs in Trio's worker threads, never on the loop.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from switchyard.actors.errors import (
    BodyTooLarge,
    GatewayError,
    InvalidRequest,
    MethodNotAllowed,
    RouteNotFound,
)
from switchyard.config.load_prompts import PromptFileError
from switchyard.config.prompts import MAX_FILE_BYTES
from switchyard.protocol.http import client_json
from switchyard.protocol.http.asgi import read_body

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

PREFIX = "/admin/config/prompts/"
# The JSON of a 1 MiB prompt can be several times larger once escaped ("\n", "\u00e9").
BODY_LIMIT = 8 * MAX_FILE_BYTES

# broken rule -> (error class, code, the request field it is about)
ERRORS: dict[str, tuple[type[GatewayError], str, str]] = {
    "file_name": (InvalidRequest, "invalid_prompt_path", "path"),
    "relative_only": (InvalidRequest, "invalid_prompt_path", "path"),
    "no_traversal": (InvalidRequest, "invalid_prompt_path", "path"),
    "regular_file": (InvalidRequest, "invalid_prompt_path", "path"),
    "inside_sandbox": (InvalidRequest, "prompt_path_outside_sandbox", "path"),
    "admin_file_type": (InvalidRequest, "prompt_path_not_allowed", "path"),
    "exists": (RouteNotFound, "prompt_not_found", "path"),
    "not_configured": (RouteNotFound, "prompts_not_configured", "path"),
    "max_size": (BodyTooLarge, "prompt_file_too_large", "content"),
    "utf8_text": (InvalidRequest, "prompt_not_utf8", "content"),
    "cache_limit": (BodyTooLarge, "prompt_cache_full", "content"),
    "write_failed": (GatewayError, "prompt_write_failed", "path"),
}


def refused(exc: PromptFileError, path: str) -> GatewayError:
    cls, code, param = ERRORS.get(exc.rule, (InvalidRequest, "invalid_prompt_path", "path"))
    return cls(f"Prompt file {path!r}: {exc} (rule: {exc.rule})", param=param, code=code,
               details={"rule": exc.rule})


class PromptsAdmin:
    def __init__(self, respond: Callable[..., Awaitable[None]]) -> None:
        self.respond = respond
        self.routes = {
            "/admin/config/prompts": {"GET": self.listing},
            "/admin/config/prompts/reload": {"POST": self.reload},
        }

    async def listing(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        """Each configured prompt: level, name, inline or file, path, size, sha256 prefix; no texts."""
        await self.respond(send, 200, json.dumps(runtime.prompts.listing()).encode())

    async def reload(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        """Re-read every prompt file: 200 when all loaded, 422 when some kept their last good text."""
        result = await runtime.prompts.reload()
        await self.respond(send, 422 if result["errors"] else 200, json.dumps(result).encode())

    async def file(self, runtime: "Runtime", scope: Any, receive: Any, send: Any) -> None:
        """GET or PUT one prompt file; ``{path}`` is relative to the config directory."""
        path = scope["path"][len(PREFIX):]
        method = scope["method"]
        if method not in ("GET", "PUT"):
            raise MethodNotAllowed(f"{method} is not allowed on {scope['path']}", allowed=("GET", "PUT"))
        try:
            if method == "GET":
                result, status = await runtime.prompts.read_file(path), 200
            else:
                content = await _content(scope, receive, runtime.snapshot.server)
                result = await runtime.prompts.write_file(path, content)
                status = 201 if result["created"] else 200
        except PromptFileError as exc:
            raise refused(exc, path) from None
        await self.respond(send, status, json.dumps(result).encode())


async def _content(scope: Any, receive: Any, server: Any) -> str:
    """The ``content`` string of a PUT body ``{"content": "..."}``."""

    raw = await read_body(scope, receive, BODY_LIMIT, server)
    try:
        body = client_json.loads(raw)
    except ValueError:
        raise InvalidRequest("The body must be JSON: {\"content\": \"...\"}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object: {\"content\": \"...\"}", code="invalid_json")
    for key in body:
        if key != "content":
            raise InvalidRequest(f"Unknown field {key!r}: the body is {{\"content\": \"...\"}}", param=key,
                                 code="unknown_parameter")
    content = body.get("content")
    if not isinstance(content, str):
        raise InvalidRequest("'content' is required and must be a string", param="content",
                             code="invalid_type" if "content" in body else "missing_required_parameter")
    return content
