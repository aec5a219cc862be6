"""Validation of ``backends[].request_extensions``."""

from __future__ import annotations

from config.rules import Reader
from config.schema import BodyExtensions


def request_extensions(r: Reader) -> BodyExtensions:
    r.finish()
    return BodyExtensions()
