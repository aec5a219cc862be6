"""Repeated warnings and errors: the first logged whole, the rest of its window counted in one line."""

import io
import json
import logging
import sys

from switchyard.actors import log_fields
from switchyard.protocol.http import logs
from switchyard.protocol.http.log_repeats import RepeatFilter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def emfile(message: str = "accept returned EMFILE (Too many open files); retrying in 0.1 seconds",
           level: int = logging.ERROR) -> logging.LogRecord:
    try:
        raise OSError(24, "Too many open files")
    except OSError:
        return logging.LogRecord("trio.serve_listeners", level, __file__, 1, message, (), sys.exc_info())


def harness(window: float = 10.0) -> tuple[RepeatFilter, Clock, list[logging.LogRecord], list[logging.LogRecord]]:
    """A filter on a clock of the test's; what it passed, and the count lines it logged."""
    clock, passed, counts = Clock(), [], []
    repeats = RepeatFilter(counts.append, logs.fields_of, window=window, clock=clock)
    return repeats, clock, passed, counts


def feed(repeats: RepeatFilter, passed: list, rec: logging.LogRecord) -> None:
    if repeats.filter(rec):
        passed.append(rec)


def test_an_error_every_100_ms_is_logged_once_with_its_traceback_then_counted_in_one_line():
    repeats, clock, passed, counts = harness()
    for _ in range(100):   # 10 s of trio's accept loop out of descriptors: the whole window, to its last instant
        feed(repeats, passed, emfile())
        clock.now += 0.1
    assert len(passed) == 1 and passed[0].exc_info is not None
    assert counts == []   # nothing said yet: the window ends with the next line after it
    clock.now += 0.05
    feed(repeats, passed, emfile())   # the next occurrence after the window: the count first, then it, whole
    assert [c.getMessage() for c in counts] == [
        "accept returned EMFILE (Too many open files); retrying in 0.1 seconds "
        "(and 99 more time(s) in 9.9s, counted, not logged one by one)"]
    assert counts[0].levelno == logging.ERROR and counts[0].exc_info is None
    assert len(passed) == 2 and passed[1].exc_info is not None


def test_the_count_comes_with_any_later_line_and_when_the_handler_closes():
    repeats, clock, passed, counts = harness()
    for _ in range(3):
        feed(repeats, passed, emfile())
    clock.now += 11
    feed(repeats, passed, logging.LogRecord("switchyard", logging.INFO, __file__, 1, "serving", (), None))
    assert [c.getMessage().endswith("(and 2 more time(s) in 0.0s, counted, not logged one by one)") for c in counts] \
        == [True]
    feed(repeats, passed, emfile())
    feed(repeats, passed, emfile())
    repeats.report_all()
    assert len(counts) == 2 and "(and 1 more time(s)" in counts[1].getMessage()


def test_different_messages_levels_and_requests_are_never_counted_together():
    repeats, _, passed, counts = harness()
    feed(repeats, passed, emfile())
    feed(repeats, passed, emfile("accept returned ENFILE (Too many open files in system); retrying in 0.1 seconds"))
    feed(repeats, passed, emfile(level=logging.WARNING))
    for request_id in ("req_1", "req_2"):   # one failure of two requests is two lines
        token = log_fields.bind(request_id=request_id)
        try:
            feed(repeats, passed, emfile())
        finally:
            log_fields.unbind(token)
    info = logging.LogRecord("switchyard", logging.INFO, __file__, 1, "served", (), None)
    feed(repeats, passed, info)
    feed(repeats, passed, info)   # info lines are never counted
    assert len(passed) == 7 and counts == []


def test_a_count_carries_the_request_fields_of_its_error_not_those_of_the_line_that_brought_it():
    out = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = logs.install("INFO", "json", stream=out)
    try:
        token = log_fields.bind(request_id="req_1")
        try:
            for _ in range(3):
                logging.getLogger("switchyard.test").error("store away")
        finally:
            log_fields.unbind(token)
        handler.close()   # the process stops: what is still counted is logged
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["message"], line["request_id"]) for line in lines] == [
        ("store away", "req_1"), ("store away (and 2 more time(s) in 0.0s, counted, not logged one by one)", "req_1")]
