"""The built-in metadata layer: OpenAI's and Google's well-known models, shipped with the package.

The spec's lowest metadata source ("built-in metadata, for OpenAI and
Gemini backends"): context windows, output limits, list prices and
capabilities of the providers' own model ids, so a gateway in front of
api.openai.com or the Gemini API prices and describes those models with no
metadata file at all. Every other layer overrides it field by field
(``model_metadata_file``, the drop-in directories, ``backends[].model_configs``),
and an operator's alias that names a built-in id takes that name over
(``load_metadata.model_catalogue``). The entries carry no aliases, so they
never rewrite a request (alias dispatch); dated ids (``gpt-4o-2024-08-06``)
find them by the resolver's date-suffix rule.

The data is ``builtin_metadata.yaml`` beside this module (package data), with
the date its figures were taken (``as_of``); ``switchyard metadata show``
names it as the ``built-in`` layer with that date. Read once per process.
"""

from __future__ import annotations

import functools
from importlib import resources

import yaml

from switchyard.config.load_metadata import entries_of
from switchyard.config.metadata import LayerEntry, Source
from switchyard.config.rules import Problems

FILE = "builtin_metadata.yaml"
LAYER = "built-in"


@functools.cache
def _read() -> tuple[str, tuple[LayerEntry, ...], tuple[str, ...]]:
    """(as_of, the entries, the problems found in them: none, as a test checks)."""
    text = resources.files("switchyard.config").joinpath(FILE).read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    as_of = str(raw.get("as_of", "unknown")) if isinstance(raw, dict) else "unknown"
    source = Source(LAYER, f"switchyard/config/{FILE}, as of {as_of}")
    problems = Problems()
    entries = entries_of(raw, f"switchyard/config/{FILE}", source, problems, top_keys=("as_of", "models"))
    return as_of, tuple(entries), tuple(str(w) for w in problems.warnings)


def entries() -> tuple[LayerEntry, ...]:
    """The built-in layer's entries, lowest layer of every catalogue."""
    return _read()[1]


def as_of() -> str:
    """The date the built-in figures were taken from the providers' pages."""
    return _read()[0]


def problems() -> tuple[str, ...]:
    return _read()[2]
