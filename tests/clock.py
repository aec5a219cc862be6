"""The suite's ``autojump_clock`` (tests/conftest.py): trio's MockClock, but a thread's work ends before virtual
time jumps.

With ``autojump_threshold=0`` a task waiting for ``trio.to_thread`` (every store call: SQLite, PostgreSQL)
leaves no task runnable, so the run loop polls without waiting, over and over, jumping virtual time to each
timer due meanwhile. That loop holds a core and the GIL the thread needs (a 5 ms SQLite open took 20 under
it), and the actors' periodic rounds run again and again for nothing: most of the CPU of the in-process
tests. While a thread runs, the loop here jumps only after ``THREAD_GRACE`` of real idleness, so it waits for
the thread's answer instead; a thread that takes longer (a hung store) still lets virtual time move on.

MockClock cannot be subclassed: the run loop's own copy of the threshold (trio's internal
``clock_autojump_threshold``, which MockClock itself keeps in step) is raised while a thread runs, by an
instrument the clock installs when the run starts; the clock's ``autojump_threshold`` stays what the test
set.
"""

from __future__ import annotations

from typing import Any

import trio
from trio.testing import MockClock, active_thread_count

THREAD_GRACE = 0.02   # seconds of real idleness, while a thread runs, before virtual time jumps


def autojump_clock(threshold: float = 0.0) -> MockClock:
    clock = MockClock(autojump_threshold=threshold)
    start = clock.start_clock

    def start_clock() -> None:
        start()
        trio.lowlevel.add_instrument(_ThreadGrace(clock))

    clock.start_clock = start_clock   # type: ignore[method-assign]
    return clock


class _ThreadGrace(trio.abc.Instrument):
    """After each task step (a ``to_thread`` call starts and returns in one), the loop's threshold follows."""

    def __init__(self, clock: MockClock) -> None:
        from trio._core._run import GLOBAL_RUN_CONTEXT

        self.clock = clock
        self.runner = GLOBAL_RUN_CONTEXT.runner
        # A trio whose run loop keeps the threshold elsewhere fails here, at once, rather than letting every
        # thread-waiting test spin as before
        assert isinstance(getattr(self.runner, "clock_autojump_threshold", None), float), \
            "trio's run loop no longer keeps clock_autojump_threshold: tests/clock.py needs updating"

    def after_task_step(self, task: Any) -> None:
        asked = self.clock.autojump_threshold
        self.runner.clock_autojump_threshold = max(asked, THREAD_GRACE) if active_thread_count() else asked
