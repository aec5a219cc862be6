"""Global prompts (``global_prompts``): the shapes.

The Snapshot holds only what the config file says (inline texts, file names);
the texts read from prompt files live in the PromptStore (actors/prompts.py),
so ``GET /admin/config`` never dumps megabytes of prompt files and a prompt
file can change without a new config revision.
"""

from __future__ import annotations

from enum import Enum
from pathlib import PurePosixPath
from typing import Any, Mapping

import attrs
from attrs import frozen

from switchyard.config import rules
from switchyard.config.fields import field
from switchyard.config.rules import Invalid

MAX_FILE_BYTES = 1024 * 1024            # one prompt file: 1 MiB
MAX_CACHE_BYTES = 50 * 1024 * 1024      # every prompt file together: 50 MiB


class MergeStrategy(Enum):
    PREPEND = "prepend"
    APPEND = "append"
    REPLACE = "replace"


def _prompts_dir(value: Any) -> str:
    text = rules.string()(value)
    path = PurePosixPath(text)
    if path.is_absolute():
        raise Invalid(f"must be a path relative to the config directory, got {text!r}")
    if ".." in path.parts:
        raise Invalid(f"must stay inside the config directory (no '..'), got {text!r}")
    return path.as_posix()


@frozen
class PromptSource:
    """One level's prompt: ``prompt`` (inline) and/or ``prompt_file``; the file wins.

    An empty inline prompt (``prompt: ""``) is a deliberate "no global prompt
    here", so a model or backend can opt out of the default.
    """

    prompt: str | None = attrs.field(default=None, metadata={"secret": True})   # never shown by admin views
    prompt_file: str | None = None      # relative to prompts_dir, as written


@frozen
class GlobalPrompts:
    """``GlobalPrompts()`` is "off": no prompt at any level, admin file routes closed.

    The prompts and their files are read by ``load_prompts``: each file is read
    through the sandbox ``prompts_dir`` draws.
    """

    enabled: bool = False               # the section says something: admin file routes are open
    default: PromptSource | None = None
    backends: Mapping[str, PromptSource] = attrs.field(factory=dict)
    models: Mapping[str, PromptSource] = attrs.field(factory=dict)
    prompts_dir: str = field(".", _prompts_dir)     # relative to base_dir
    base_dir: str = ""                  # the config file's directory ("" = the working directory)
    merge_strategy: MergeStrategy = field(MergeStrategy.PREPEND, rules.one_of({s.value: s for s in MergeStrategy}))
    separator: str = field("\n\n", rules.any_string)

    def files(self) -> tuple[str, ...]:
        """Every prompt file the config names (relative to prompts_dir), once, in config order."""
        out: dict[str, None] = {}
        levels = [self.default, *self.backends.values(), *self.models.values()]
        for source in levels:
            if source is not None and source.prompt_file is not None:
                out.setdefault(source.prompt_file, None)
        return tuple(out)
