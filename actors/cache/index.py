"""The semantic cache's in-process vector index: this worker's, bounded, exact (brute-force cosine).

Rows live in namespaces (``semantic.py``: the exact key of everything that is
not embedded, the target, the key's scope and the embedding model), so a
lookup only compares vectors that could answer the call. Each namespace is a
float32 matrix of unit vectors; a lookup is one matrix-vector product and an
argmax (numpy: about 0.7 ms for 2,000 vectors of 1,536 dimensions on one
core, docs/performance.md), exact where an approximate index (hnswlib,
usearch) would trade recall for speed at sizes this bound never reaches.
Past ``max_entries`` the oldest row goes first; a row past its expiry is
never returned. Time is an argument, so this module reads no clock.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from attrs import frozen


@frozen
class Match:
    answer_key: bytes     # where the answer is kept (the exact cache's store)
    similarity: float


class _Space:
    __slots__ = ("vectors", "keys", "expires")

    def __init__(self, dim: int) -> None:
        self.vectors = np.zeros((0, dim), dtype=np.float32)
        self.keys: list[bytes] = []
        self.expires: list[float] = []


class WrongSize(ValueError):
    """A vector whose length is not the namespace's (an embeddings model that changed its answer's size)."""


class SemanticIndex:
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._spaces: dict[bytes, _Space] = {}
        self._order: OrderedDict[tuple[bytes, bytes], None] = OrderedDict()   # (namespace, answer key), oldest first

    @property
    def entries(self) -> int:
        return len(self._order)

    def has(self, namespace: bytes, answer_key: bytes) -> bool:
        return (namespace, answer_key) in self._order

    def search(self, namespace: bytes, vector: list[float], threshold: float, now: float) -> Match | None:
        space = self._spaces.get(namespace)
        if space is None or not space.keys:
            return None
        q = _unit(vector)
        if q.shape[0] != space.vectors.shape[1]:
            raise WrongSize(f"{q.shape[0]} dimensions where the index has {space.vectors.shape[1]}")
        scores = space.vectors @ q
        for i in np.argsort(-scores):
            score = float(scores[i])
            if score < threshold:
                return None
            if space.expires[i] > now:
                return Match(space.keys[i], min(1.0, score))
        return None

    def add(self, namespace: bytes, vector: list[float], answer_key: bytes, expires: float) -> None:
        q = _unit(vector)
        space = self._spaces.get(namespace)
        if space is None or not space.keys:
            space = self._spaces[namespace] = _Space(q.shape[0])
        elif q.shape[0] != space.vectors.shape[1]:
            raise WrongSize(f"{q.shape[0]} dimensions where the index has {space.vectors.shape[1]}")
        if (namespace, answer_key) in self._order:
            self.remove(namespace, answer_key)
            space = self._spaces.setdefault(namespace, _Space(q.shape[0]))
        space.vectors = np.vstack((space.vectors, q[None, :]))
        space.keys.append(answer_key)
        space.expires.append(expires)
        self._order[(namespace, answer_key)] = None
        while len(self._order) > self.max_entries:
            self.remove(*next(iter(self._order)))

    def remove(self, namespace: bytes, answer_key: bytes) -> None:
        """Forget a row (evicted, expired in the store, or poisoned)."""
        self._order.pop((namespace, answer_key), None)
        space = self._spaces.get(namespace)
        if space is None or answer_key not in space.keys:
            return
        i = space.keys.index(answer_key)
        space.vectors = np.delete(space.vectors, i, axis=0)
        del space.keys[i]
        del space.expires[i]
        if not space.keys:
            del self._spaces[namespace]

    def forget_answer(self, answer_key: bytes) -> None:
        """Forget every row that points at ``answer_key`` (a poisoned answer)."""
        for namespace, key in [k for k in self._order if k[1] == answer_key]:
            self.remove(namespace, key)


def _unit(vector: list[float]) -> "np.ndarray":
    q = np.asarray(vector, dtype=np.float32)
    if q.ndim != 1 or q.shape[0] == 0 or not np.all(np.isfinite(q)):
        raise ValueError("not a vector of finite numbers")
    norm = float(np.linalg.norm(q))
    if norm == 0:
        raise ValueError("a zero vector")
    return q / norm
