"""The prompt tokenizers the operator provides (``kv_cache_index.tokenizers``), read from their files.

Block keys only match an engine's events when the gateway reads a prompt as
the same token ids the engine does: its ``tokenizer.json`` (the file Hugging
Face's fast tokenizers and vLLM load, read here by the same Rust library)
and its chat template. Per model glob the operator names the files; nothing
is ever downloaded. The template is, in this order: the ``chat_template``
file named (a ``.jinja`` file, or a JSON file with a ``chat_template`` key:
``tokenizer_config.json`` or ``chat_template.json``), else
the first of ``chat_template.jinja``, ``chat_template.json`` and
``tokenizer_config.json`` beside ``tokenizer.json`` that holds one: where
transformers looks in a model's folder; none (a base model): its chat calls
are not keyed. The special tokens a template uses (``bos_token`` ...) come
from the JSON file holding it, else from ``tokenizer_config.json`` beside
``tokenizer.json``.

Read when the config is loaded and on every reload (the Runtime calls
``load_tokenizers``; a file that cannot be read rejects the revision like any
config error, naming ``kv_cache_index.tokenizers.<glob>``); files unchanged
since the previous revision are not parsed again. A chat prompt is encoded
without special tokens (its template writes them, as vLLM's chat endpoint
does), a completions prompt with them.
"""

from __future__ import annotations

import json
import logging
import os
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

import attrs
import jinja2
import tokenizers
from attrs import frozen

from switchyard.actors.kv.chat_template import ChatTemplate
from switchyard.actors.kv.prompt_tokens import PromptTokenizer
from switchyard.config.load import ConfigError

log = logging.getLogger("switchyard.kv_tokenizers")

SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_BESIDE = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


class TokenizerFileError(ValueError):
    """A tokenizer's file that is missing or not what it should be; the message names the file."""


class TokenizerFiles(Protocol):
    """One entry of ``kv_cache_index.tokenizers``: paths already resolved against the config file's folder."""

    @property
    def tokenizer(self) -> str: ...
    @property
    def chat_template(self) -> str | None: ...


class FileTokenizer:
    """``prompt_tokens.PromptTokenizer`` over a model's own tokenizer and chat template."""

    def __init__(self, tokenizer: tokenizers.Tokenizer, template: ChatTemplate | None,
                 stamp: tuple[Any, ...] = ()) -> None:
        self.tokenizer = tokenizer
        self.template = template
        self.stamp = stamp   # what the files were when read: unchanged files are not read again

    def chat(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None = None) -> list[int]:
        """No ids (the call is not keyed) without a template, or when the template refuses the chat (its
        ``raise_exception``: the engine answers such a call 400) or fails on it."""
        if self.template is None:
            return []
        try:
            text = self.template.render(messages, tools)
        except Exception as exc:
            log.debug("chat template refused the prompt: %s", exc)
            return []
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def text(self, prompt: str) -> list[int]:
        return list(self.tokenizer.encode(prompt, add_special_tokens=True).ids)


@frozen
class Tokenizers:
    """The configured tokenizers by model glob, in the config's order: a model's own name first, else the
    first glob matching it."""

    by_glob: Mapping[str, PromptTokenizer] = attrs.field(factory=dict)

    def for_model(self, model: str) -> PromptTokenizer | None:
        if model in self.by_glob:
            return self.by_glob[model]
        for glob, tokenizer in self.by_glob.items():
            if fnmatchcase(model, glob):
                return tokenizer
        return None


def load_tokenizers(entries: Mapping[str, TokenizerFiles], source: str,
                    previous: Tokenizers | None = None) -> Tokenizers:
    """Every entry's tokenizer; ``ConfigError(source, ...)`` naming each entry that cannot be read. An entry
    whose files are unchanged since ``previous`` keeps its tokenizer."""
    loaded: dict[str, PromptTokenizer] = {}
    errors: list[str] = []
    old = previous.by_glob if previous is not None else {}
    for glob, files in entries.items():
        try:
            stamp = _stamp(files)
            kept = old.get(glob)
            if isinstance(kept, FileTokenizer) and kept.stamp == stamp:
                loaded[glob] = kept
            else:
                loaded[glob] = load_tokenizer(Path(files.tokenizer),
                                              Path(files.chat_template) if files.chat_template else None)
        except TokenizerFileError as exc:
            errors.append(f"kv_cache_index.tokenizers.{glob}: {exc}")
    if errors:
        raise ConfigError(source, errors)
    return Tokenizers(loaded)


def load_tokenizer(tokenizer: Path, chat_template: Path | None = None) -> FileTokenizer:
    """A model's tokenizer from its ``tokenizer.json`` and its chat template (see the module's docstring)."""
    stamp = _stamp_of(tokenizer, chat_template)
    text = _text(tokenizer)
    try:
        encoder = tokenizers.Tokenizer.from_str(text)
    except Exception as exc:   # the Rust library's own error: not a tokenizer.json it can read
        raise TokenizerFileError(f"{tokenizer}: not a tokenizer.json ({exc})") from None
    found = _template_file(tokenizer.parent, chat_template)
    if found is None:
        log.warning("no chat template for %s (none named, none of %s beside it): its chat calls are not keyed",
                    tokenizer, ", ".join(_BESIDE))
        return FileTokenizer(encoder, None, stamp)
    template_file, source, config = found
    try:
        template = ChatTemplate(_named(source, template_file), special_tokens(config))
    except jinja2.TemplateSyntaxError as exc:
        raise TokenizerFileError(f"{template_file}: the chat template does not compile: {exc} "
                                 f"(line {exc.lineno})") from None
    return FileTokenizer(encoder, template, stamp)


def _template_file(beside: Path, named: Path | None) -> tuple[Path, Any, dict[str, Any]] | None:
    """The template's file, its source and the JSON holding the special tokens: the file named (which must
    hold a template), else the first of ``_BESIDE`` that does."""
    config_beside = beside / "tokenizer_config.json"
    for path in [named] if named is not None else [beside / n for n in _BESIDE if (beside / n).is_file()]:
        if path.suffix == ".json":
            config = _json(path)
            if config.get("chat_template"):
                return path, config["chat_template"], config
            if named is not None:
                raise TokenizerFileError(f"{path}: no chat_template in it")
        else:
            return path, _text(path), _json(config_beside) if config_beside.is_file() else {}
    return None


def special_tokens(config: Mapping[str, Any]) -> dict[str, Any]:
    """The special-token strings a ``tokenizer_config.json`` names (each a string or an AddedToken object)."""
    tokens: dict[str, Any] = {}
    for name in SPECIAL_TOKENS:
        value = _token(config.get(name))
        if value is not None:
            tokens[name] = value
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        tokens["additional_special_tokens"] = [t for t in map(_token, extra) if t is not None]
    return tokens


def _token(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _named(source: Any, where: Path) -> str | dict[str, str]:
    """A template, or transformers' list of named ones (``[{"name": "default", "template": ...}, ...]``)."""
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                        and isinstance(t.get("template"), str) for t in source) and source:
        return {t["name"]: t["template"] for t in source}
    raise TokenizerFileError(f"{where}: chat_template is neither a string nor a list of named templates")


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(_text(path))
    except ValueError as exc:
        raise TokenizerFileError(f"{path}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise TokenizerFileError(f"{path}: expected a JSON object")
    return value


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TokenizerFileError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TokenizerFileError(f"{path}: not UTF-8 text") from None


def _stamp(files: TokenizerFiles) -> tuple[Any, ...]:
    return _stamp_of(Path(files.tokenizer), Path(files.chat_template) if files.chat_template else None)


def _stamp_of(tokenizer: Path, chat_template: Path | None) -> tuple[Any, ...]:
    """Each file that can play a part, with its size and modification time (None: absent)."""
    paths = [tokenizer, *([chat_template] if chat_template else []),
             *(tokenizer.parent / n for n in _BESIDE)]
    return tuple((str(p), _stat(p)) for p in paths)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns
