"""Global prompts (``global_prompts``): the shapes.

The Snapshot holds only what the config file says (inline texts, file names);
the texts read from prompt files live in the PromptStore (actors/prompts.py),
so ``GET /admin/config`` never dumps megabytes of prompt files and a prompt
file can change without a new config revision.
"""

from __future__ import annotations

from enum import Enum
from typing import Mapping

import attrs
from attrs import frozen

MAX_FILE_BYTES = 1024 * 1024            # one prompt file: 1 MiB
MAX_CACHE_BYTES = 50 * 1024 * 1024      # every prompt file together: 50 MiB


class MergeStrategy(Enum):
    PREPEND = "prepend"
    APPEND = "append"
    REPLACE = "replace"


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
    """``GlobalPrompts()`` is "off": no prompt at any level, admin file routes closed."""

    enabled: bool = False               # the section says something: admin file routes are open
    default: PromptSource | None = None
    backends: Mapping[str, PromptSource] = attrs.field(factory=dict)
    models: Mapping[str, PromptSource] = attrs.field(factory=dict)
    prompts_dir: str = "."              # relative to base_dir
    base_dir: str = ""                  # the config file's directory ("" = the working directory)
    merge_strategy: MergeStrategy = MergeStrategy.PREPEND
    separator: str = "\n\n"

    def files(self) -> tuple[str, ...]:
        """Every prompt file the config names (relative to prompts_dir), once, in config order."""
        out: dict[str, None] = {}
        levels = [self.default, *self.backends.values(), *self.models.values()]
        for source in levels:
            if source is not None and source.prompt_file is not None:
                out.setdefault(source.prompt_file, None)
        return tuple(out)
