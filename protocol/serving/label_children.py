"""A metric's labelled children, each looked up once.

prometheus-client's ``labels()`` validates and hashes its values and takes a
lock on every call, which costs more than the increment it serves. Every
label value the gateway uses is bounded (by the configuration, or by a cap
that turns the rest into ``other``), and the metric keeps one child per
combination anyway, so remembering them is bounded too.
"""

from __future__ import annotations

from typing import Any


class LabelChildren:
    def __init__(self) -> None:
        self._children: dict[tuple[Any, ...], Any] = {}   # (metric, labels...) -> its child

    def __call__(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, remembered."""
        key = (metric, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child
