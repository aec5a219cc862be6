"""What an images request may ask, checked at the door: the fields' types, and each model family's limits.

The spec has the router enforce the image request limits of each model
family in code, not from metadata (metadata's ``limits`` are information
for API consumers). The families are OpenAI's, as its API reference states
them; a model outside them (a local image server's) gets only the checks
every images call gets. Edits and variations take a fixed list of model
names, checked on the name the client sent, before any alias is rewritten,
so an alias reaches these endpoints only when it is itself on the list.
"""

from __future__ import annotations

from typing import Any, Mapping

from attrs import frozen

from switchyard.actors.errors import InvalidRequest

# The models OpenAI's edits and variations endpoints take (its API reference).
EDIT_MODELS = ("dall-e-2", "gpt-image-1", "gpt-image-1-mini", "gpt-image-1.5")
VARIATION_MODELS = ("dall-e-2",)
RESPONSE_FORMATS = ("url", "b64_json")
MAX_N = 10


@frozen
class Family:
    max_prompt: int                     # characters
    max_n: int
    sizes: tuple[str, ...]
    qualities: tuple[str, ...] = ()     # empty: the field is not checked
    styles: tuple[str, ...] = ()


FAMILIES = {
    "dall-e-2": Family(1000, 10, ("256x256", "512x512", "1024x1024"), ("standard",)),
    "dall-e-3": Family(4000, 1, ("1024x1024", "1792x1024", "1024x1792"), ("standard", "hd"), ("vivid", "natural")),
    "gpt-image-1": Family(32000, 10, ("auto", "1024x1024", "1536x1024", "1024x1536"),
                          ("auto", "low", "medium", "high")),
}


def family_of(model: str) -> Family | None:
    """The family ``model`` belongs to: its own name, or a name it extends (``gpt-image-1-mini``)."""
    for name, family in FAMILIES.items():
        if model == name or model.startswith(name + "-") or model.startswith(name + "."):
            return family
    return None


def check_allowed(model: str, allowed: tuple[str, ...], path: str) -> None:
    if model not in allowed:
        raise InvalidRequest(f"The model '{model}' is not served on {path}; it takes {', '.join(allowed)}",
                             param="model", code="unsupported_model")


def _type(value: Any) -> str:
    return {str: "string", bool: "boolean", int: "integer", float: "number", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def string_field(payload: Mapping[str, Any], field: str) -> str | None:
    """``payload[field]``: a string, or absent (None); anything else is the client's 400 naming it."""
    value = payload.get(field)
    if value is not None and not isinstance(value, str):
        raise InvalidRequest(f"'{field}' must be a string, got {_type(value)}", param=field, code="invalid_type")
    return value


def _one_of(value: str | None, field: str, allowed: tuple[str, ...], model: str | None = None) -> None:
    if value is not None and allowed and value not in allowed:
        whose = f" for '{model}'" if model else ""
        raise InvalidRequest(f"'{field}' must be one of {', '.join(allowed)}{whose}, got {value!r}",
                             param=field, code="invalid_value")


def _count(value: Any, form: bool) -> int | None:
    """``n`` as a number: a JSON integer, or a form field's decimal text."""
    if value is None:
        return None
    if form and isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InvalidRequest(f"'n' must be an integer, got {_type(value) if not form else repr(value)}", param="n",
                         code="invalid_type")


def check_request(payload: Mapping[str, Any], model: str, *, prompt: bool, form: bool) -> None:
    """The fields every images call reads, and ``model``'s family's limits; the first mistake is a 400."""
    family = family_of(model)
    if prompt:
        text = string_field(payload, "prompt")
        if text is None:
            raise InvalidRequest("Missing required parameter: 'prompt'", param="prompt",
                                 code="missing_required_parameter")
        if not text.strip():
            raise InvalidRequest("'prompt' must not be empty", param="prompt", code="invalid_value")
        if family is not None and len(text) > family.max_prompt:
            raise InvalidRequest(f"'prompt' is {len(text)} characters; '{model}' takes at most {family.max_prompt}",
                                 param="prompt", code="invalid_value")
    n = _count(payload.get("n"), form)
    most = family.max_n if family is not None else MAX_N
    if n is not None and not 1 <= n <= most:
        raise InvalidRequest(f"'n' must be between 1 and {most}{f' for {model!r}' if family else ''}, got {n}",
                             param="n", code="invalid_value")
    _one_of(string_field(payload, "response_format"), "response_format", RESPONSE_FORMATS)
    size, quality, style = (string_field(payload, name) for name in ("size", "quality", "style"))
    if family is not None:
        _one_of(size, "size", family.sizes, model)
        _one_of(quality, "quality", family.qualities, model)
        _one_of(style, "style", family.styles, model)
    stream = payload.get("stream")
    if stream not in (None, False, "false"):
        raise InvalidRequest("'stream' is not served for images here: the answer comes whole", param="stream",
                             code="invalid_value")
