"""The semantic cache's in-process vector index: this worker's, bounded, exact (brute-force cosine).

Rows live in namespaces (``semantic.py``: the exact key of everything that is
not embedded, the target, the key's scope and the embedding model), so a
lookup only compares vectors that could answer the call. Each namespace is a
float32 matrix of unit vectors; a lookup is one matrix-vector product and an
argmax (numpy on one core: about 0.2 ms for 2,000 vectors of 1,536
dimensions; past the CPU's caches it is bound by memory, 3.8 ms for 10,000:
docs/performance.md), exact where an approximate index (hnswlib, usearch)
would trade recall for speed.
Past ``max_entries`` the oldest row goes first; a row past its expiry is
never returned. Rows sit in a matrix with room to grow (doubling), and a
removed row takes the last row's place, so adding and evicting on a miss
copies one row, not the matrix (a copy of 10,000 rows cost 20 ms a miss).
Time is an argument, so this module reads no clock.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from attrs import frozen

MIN_ROWS = 1   # a namespace's buffer starts at one row and doubles: most namespaces hold a few entries


@frozen
class Match:
    answer_key: bytes     # where the answer is kept (the exact cache's store)
    similarity: float


class _Space:
    """One namespace's rows: ``buf[:n]`` are the vectors, ``keys[i]``/``expires[i]`` row i's answer and expiry."""

    __slots__ = ("buf", "n", "keys", "expires", "rows")

    def __init__(self, dim: int) -> None:
        self.buf = np.zeros((MIN_ROWS, dim), dtype=np.float32)
        self.n = 0
        self.keys: list[bytes] = []
        self.expires: list[float] = []
        self.rows: dict[bytes, int] = {}   # answer key -> its row

    @property
    def vectors(self) -> "np.ndarray":
        return self.buf[:self.n]

    def append(self, q: "np.ndarray", answer_key: bytes, expires: float) -> None:
        if self.n == self.buf.shape[0]:
            grown = np.zeros((2 * self.n, self.buf.shape[1]), dtype=np.float32)
            grown[:self.n] = self.buf
            self.buf = grown
        self.buf[self.n] = q
        self.rows[answer_key] = self.n
        self.keys.append(answer_key)
        self.expires.append(expires)
        self.n += 1

    def drop(self, answer_key: bytes) -> None:
        """Forget a row: the last row moves into its place (the order of rows means nothing)."""
        i = self.rows.pop(answer_key, None)
        if i is None:
            return
        last = self.n - 1
        if i != last:
            self.buf[i] = self.buf[last]
            self.keys[i], self.expires[i] = self.keys[last], self.expires[last]
            self.rows[self.keys[i]] = i
        self.keys.pop()
        self.expires.pop()
        self.n = last
        if MIN_ROWS < self.buf.shape[0] and self.n <= self.buf.shape[0] // 4:   # give memory back
            self.buf = self.buf[:self.buf.shape[0] // 2].copy()


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

    def search(self, namespace: bytes, vector: "list[float] | np.ndarray", threshold: float,
               now: float) -> Match | None:
        space = self._spaces.get(namespace)
        if space is None or not space.keys:
            return None
        q = unit_vector(vector)
        if q.shape[0] != space.vectors.shape[1]:
            raise WrongSize(f"{q.shape[0]} dimensions where the index has {space.vectors.shape[1]}")
        scores = space.vectors @ q
        best = int(np.argmax(scores))
        if scores[best] < threshold:
            return None   # the usual miss: no sort
        if space.expires[best] > now:
            return Match(space.keys[best], min(1.0, float(scores[best])))
        above = np.flatnonzero(scores >= threshold)
        for i in above[np.argsort(-scores[above])]:   # the best was expired: the next ones, best first
            if space.expires[i] > now:
                return Match(space.keys[i], min(1.0, float(scores[i])))
        return None

    def add(self, namespace: bytes, vector: "list[float] | np.ndarray", answer_key: bytes, expires: float) -> None:
        q = unit_vector(vector)
        space = self._spaces.get(namespace)
        if space is None or not space.keys:
            space = self._spaces[namespace] = _Space(q.shape[0])
        elif q.shape[0] != space.vectors.shape[1]:
            raise WrongSize(f"{q.shape[0]} dimensions where the index has {space.vectors.shape[1]}")
        if (namespace, answer_key) in self._order:
            self.remove(namespace, answer_key)
            space = self._spaces.setdefault(namespace, _Space(q.shape[0]))
        space.append(q, answer_key, expires)
        self._order[(namespace, answer_key)] = None
        while len(self._order) > self.max_entries:
            self.remove(*next(iter(self._order)))

    def remove(self, namespace: bytes, answer_key: bytes) -> None:
        """Forget a row (evicted, expired in the store, or poisoned)."""
        self._order.pop((namespace, answer_key), None)
        space = self._spaces.get(namespace)
        if space is None:
            return
        space.drop(answer_key)
        if not space.keys:
            del self._spaces[namespace]

    def forget_answer(self, answer_key: bytes) -> None:
        """Forget every row that points at ``answer_key`` (a poisoned answer)."""
        for namespace, key in [k for k in self._order if k[1] == answer_key]:
            self.remove(namespace, key)


def unit_vector(vector: "list[float] | np.ndarray") -> "np.ndarray":
    """``vector`` as float32 of length 1. Made once per call (``SemanticCache.probe``) and handed to both
    ``search`` and ``add``: reading 1,536 Python floats into an array costs about 480k instructions; an array
    already made is taken as it is (checked and scaled in C, a few thousand)."""
    q = np.asarray(vector, dtype=np.float32)
    if q.ndim != 1 or q.shape[0] == 0 or not np.all(np.isfinite(q)):
        raise ValueError("not a vector of finite numbers")
    norm = float(np.linalg.norm(q))
    if norm == 0:
        raise ValueError("a zero vector")
    return q / norm
