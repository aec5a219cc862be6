"""Every config key the docs show loads: each ```yaml block of docs/*.md and README.md goes through
``load_file``, the loader ``switchyard serve`` and ``switchyard config validate`` use.

What a block may be, so a writer knows the rule:

- **A config file, or its top-level part.** A block with ``backends`` is a whole file, loaded as it
  is. A block without is a fragment: its top-level keys are laid over ``BASE`` (one simulated
  backend, ``docs-base``), replacing BASE's own. Write a nested setting under its full path
  (``smart_routing:`` / ``routing_policies:``), as it goes in the file; a fragment that names a
  backend must show that backend.
- **A model-metadata file**: a block whose only top-level key is ``models``. It is loaded as BASE's
  ``model_metadata_file``.
- **Invalid on purpose**: a block whose first line starts with ``# invalid on purpose`` (an
  example of the errors a config gets) must fail to load. When the next fenced block is a plain
  one holding ``error: ...`` lines (what ``config validate`` prints), they are exactly its errors.

``${VAR}`` references get a placeholder value. The files a block names (a metadata file or
directory, global_prompts' prompt files, kv_cache_index's tokenizer files) are created in the block's
config directory: a metadata file with no models, a prompt file of one line, a tokenizer file of ``{}``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest
import yaml

from switchyard.config.load import ConfigError, load_file

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])
FENCE = re.compile(r"^```yaml[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
NEXT_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
INVALID = "# invalid on purpose"
BASE: dict[str, Any] = {"backends": [{"name": "docs-base", "type": "simulated", "models": ["demo"]}]}


class Placeholders(Mapping[str, str]):
    """Every environment variable is set, to a value naming it."""

    def __getitem__(self, name: str) -> str:
        return f"placeholder-{name.lower()}"

    def __contains__(self, name: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def blocks() -> list[Any]:
    """(block, the errors the docs show for it) per ```yaml block, its id the page and line."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            where = f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            found.append(pytest.param(m.group(1), shown_errors(text, m.end()), id=where))
    return found


def shown_errors(text: str, after: int) -> list[str] | None:
    """The ``error: `` lines of the plain fenced block that comes next, if it has any."""
    m = NEXT_FENCE.search(text, after + 1)
    if m is None or m.group(1):
        return None
    lines = [line.removeprefix("error: ") for line in m.group(2).splitlines() if line.startswith("error: ")]
    return lines or None


BLOCKS = blocks()


def config_of(block: str, directory: Path) -> dict[str, Any]:
    """The config file a block stands for (see the module's rules), its named files created in ``directory``."""
    raw = yaml.safe_load(block)
    assert isinstance(raw, dict), "a block is a config file or its top-level part: a mapping"
    if set(raw) == {"models"}:   # a model-metadata file
        (directory / "docs-metadata.yaml").write_text(block, encoding="utf-8")
        return {**BASE, "model_metadata_file": "docs-metadata.yaml"}
    config = raw if "backends" in raw else {**BASE, **raw}
    create_named_files(config, directory)
    return config


def create_named_files(config: Mapping[str, Any], directory: Path) -> None:
    if isinstance(config.get("model_metadata_file"), str):
        write(directory / config["model_metadata_file"], "models: []\n")
    for name in config.get("model_metadata_dirs") or ():
        (directory / name).mkdir(parents=True, exist_ok=True)
    index = config.get("kv_cache_index")
    for files in (index.get("tokenizers") or {}).values() if isinstance(index, dict) else ():
        for key in ("tokenizer", "chat_template"):
            if isinstance(files, dict) and isinstance(files.get(key), str):
                write(directory / files[key], "{}\n")
    prompts = config.get("global_prompts")
    if isinstance(prompts, dict):
        sandbox = directory / str(prompts.get("prompts_dir") or ".")
        sandbox.mkdir(parents=True, exist_ok=True)
        levels = [prompts, *(prompts.get("backends") or {}).values(), *(prompts.get("models") or {}).values()]
        for level in levels:
            for key in ("default_file", "prompt_file"):
                if isinstance(level, dict) and isinstance(level.get(key), str):
                    write(sandbox / level[key], "Answer as the operator wrote it.\n")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def load(block: str, directory: Path) -> None:
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config_of(block, directory), sort_keys=False), encoding="utf-8")
    load_file(path, env=Placeholders())


def test_the_docs_have_yaml_examples():
    assert len(BLOCKS) >= 40


@pytest.mark.parametrize("block, shown", BLOCKS)
def test_every_yaml_example_in_the_docs_loads(block, shown, tmp_path):
    if block.lstrip().lower().startswith(INVALID):
        with pytest.raises(ConfigError) as refused:
            load(block, tmp_path)
        if shown is not None:
            assert refused.value.errors == shown, "the errors the docs show are not the ones it gets"
        return
    try:
        load(block, tmp_path)
    except ConfigError as err:
        pytest.fail("the example does not load:\n" + "\n".join(err.errors))
