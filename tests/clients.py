"""Requests real clients sent (``tests/data/clients/``: method, path, the headers that matter, the body), as the
in-process harness and the e2e clients take them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from attrs import frozen

CLIENTS = Path(__file__).parent / "data" / "clients"


@frozen
class Recorded:
    path: str                              # without its query (the harness routes on the path)
    headers: list[tuple[bytes, bytes]]
    body: dict[str, Any]


def recorded(name: str) -> Recorded:
    """The request of ``tests/data/clients/<name>.json``; the body is a fresh copy each time."""
    data = json.loads((CLIENTS / f"{name}.json").read_text(encoding="utf-8"))
    headers = [(k.encode(), v.encode()) for k, v in data["headers"].items()]
    return Recorded(data["path"].split("?", 1)[0], headers, copy.deepcopy(data["body"]))
