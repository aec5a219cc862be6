"""Validation of ``request_params`` and ``request_presets``."""

from __future__ import annotations

from typing import Mapping

from config.params import ParamPolicy, Preset
from config.rules import Reader


def request_params(r: Reader) -> ParamPolicy:
    r.finish()
    return ParamPolicy()


def request_presets(r: Reader) -> Mapping[str, Preset]:
    r.finish()
    return {}
