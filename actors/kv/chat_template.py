"""A model's chat template rendered as its engine renders it: transformers' Jinja environment, vLLM's messages.

vLLM renders a chat with the model's Jinja template through transformers'
``apply_chat_template``; the KV index must see the same text, or no block
of a chat prompt ever matches what the engine cached. So the environment is
transformers' (a sandbox that cannot touch the process: trim_blocks,
lstrip_blocks, loop controls, the ``{% generation %}`` tag, a ``tojson``
that keeps non-ASCII, ``raise_exception`` and ``strftime_now``), rendered
with the generation prompt, the tools and the tokenizer's special tokens
(``bos_token`` ...), and the messages first shaped as vLLM shapes them:
a content-parts list becomes its text parts joined by newlines, an
assistant's tool-call arguments are parsed from their JSON string (tool-use
templates expect objects), an empty tool-call list is dropped.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Mapping, Sequence

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class _Generation(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}``: transformers marks the assistant's tokens with it; rendered
    as its body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return str(caller())


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


class ChatTemplate:
    """One model's template (or its named templates: ``default``, and ``tool_use`` for calls with tools),
    compiled once; ``special_tokens`` are the tokenizer's (``bos_token``: ``"<s>"``, ...)."""

    def __init__(self, source: str | Mapping[str, str], special_tokens: Mapping[str, Any]) -> None:
        env = environment()
        named = {"default": source} if isinstance(source, str) else dict(source)
        self.templates = {name: env.from_string(text) for name, text in named.items()}
        self.special_tokens = dict(special_tokens)

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None = None) -> str:
        template = self.templates.get("tool_use") if tools else None
        template = template or self.templates.get("default") or next(iter(self.templates.values()))
        return template.render(messages=[vllm_message(m) for m in messages], tools=list(tools) if tools else None,
                               documents=None, add_generation_prompt=True, **self.special_tokens)


def vllm_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` as vLLM hands it to the template (see the module's docstring)."""
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = "\n".join(p["text"] for p in content
                                   if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    elif content is None:
        out["content"] = ""
    calls = out.get("tool_calls")
    if out.get("role") == "assistant" and isinstance(calls, list):
        if not calls:
            del out["tool_calls"]
        else:
            out["tool_calls"] = [_parsed_arguments(call) for call in calls]
    return out


def _parsed_arguments(call: Any) -> Any:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("arguments", ""), (str, type(None))):
        return call
    arguments = function.get("arguments")
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return call   # not JSON: left as the client sent it
    return {**call, "function": {**function, "arguments": parsed}}
