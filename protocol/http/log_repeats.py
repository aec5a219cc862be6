"""A warning or error that repeats many times a second is logged once, then counted.

trio's accept loop logs an error with its traceback every 0.1 s while the
process is out of file descriptors; a store that is away or a backend that
fails every check can flood the log the same way. The first occurrence goes
out at once, traceback and all. The same one again within the next
``WINDOW`` seconds is only counted, and the count goes out as one line once
the window is over: before the next line logged after it (that error again,
or any other), or when the handler closes (the process stops). "The same"
means the same logger, level, message, exception type and request fields:
one failure of two different requests is two lines.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

import attrs

WINDOW = 10.0   # seconds
FIELDS_ATTR = "switchyard_fields"   # a record's request fields, fixed (a count is logged in another request's context)

Fields = Callable[[logging.LogRecord], dict[str, Any]]


@attrs.define
class _Window:
    first: "_First"
    fields: dict[str, Any]
    began: float
    count: int = 0
    last: float = 0.0


@attrs.frozen
class _First:
    """What the count line needs of the first record: never the record itself, whose traceback holds
    every frame (and their locals) alive for the window."""

    name: str
    levelno: int
    pathname: str
    lineno: int
    func: str | None
    message: str

    @classmethod
    def of(cls, record: logging.LogRecord) -> "_First":
        return cls(record.name, record.levelno, record.pathname, record.lineno, record.funcName, record.getMessage())


class RepeatFilter(logging.Filter):
    """Counts repeats of warnings and errors instead of passing them; ``report`` logs each count."""

    def __init__(self, report: Callable[[logging.LogRecord], object], fields: Fields, window: float = WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._report, self._fields, self.window, self._clock = report, fields, window, clock
        self._lock = threading.Lock()   # records come from worker threads too (to_thread, the span exporter)
        self._open: dict[tuple[Any, ...], _Window] = {}   # oldest first: every window is as long

    def filter(self, record: logging.LogRecord) -> bool:
        if hasattr(record, FIELDS_ATTR):
            return True   # a count of ours, or a record whose fields were fixed on purpose
        if record.levelno < logging.WARNING and not self._open:
            return True   # the usual line: nothing to count, no count owed
        now = self._clock()
        passes = True
        with self._lock:
            over = self._take_over(now)
            if record.levelno >= logging.WARNING:
                fields = self._fields(record)
                exc = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else None
                key = (record.name, record.levelno, record.getMessage(), exc, tuple(sorted(fields.items())))
                window = self._open.get(key)
                if window is None:
                    self._open[key] = _Window(_First.of(record), fields, now)
                else:
                    window.count += 1
                    window.last = now
                    passes = False
        for window in over:
            self._report(_count_line(window))
        return passes

    def report_all(self) -> None:
        """Log every count still open (the handler is closing)."""
        with self._lock:
            over = [w for w in self._open.values() if w.count]
            self._open.clear()
        for window in over:
            self._report(_count_line(window))

    def _take_over(self, now: float) -> list[_Window]:
        """Close the windows that ended by ``now``; those that counted repeats."""
        over = []
        while self._open:
            key, window = next(iter(self._open.items()))
            if now < window.began + self.window:
                break
            del self._open[key]
            if window.count:
                over.append(window)
        return over


def _count_line(window: _Window) -> logging.LogRecord:
    first = window.first
    record = logging.LogRecord(first.name, first.levelno, first.pathname, first.lineno,
                               "%s (and %d more time(s) in %.1fs, counted, not logged one by one)",
                               (first.message, window.count, window.last - window.began), None, first.func)
    setattr(record, FIELDS_ATTR, window.fields)
    return record
