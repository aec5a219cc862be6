"""Records into the store so that one record never holds back the others.

A store says whether a failed write is the records' fault (``RecordRefused``:
a number past its column, text it cannot encode, a type it cannot bind) or
its own (anything else: unreachable, locked, full, read-only). A batch it
refuses for a record is written one record at a time, and a record it refuses
(twice: a failure of the moment is not the record's) goes to the quarantine
file (``quarantine.py``) with its reason, a count and one log line. Any other
failure means the store is down and the LedgerActor spills, as before. The
spill file's replay goes the same way, line by line.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Sequence

from switchyard.actors.ledger.quarantine import QuarantineFile, line_entry, record_entry
from switchyard.actors.ledger.record import LedgerRecord, RecordRefused
from switchyard.actors.ledger.store import UsageStore

log = logging.getLogger("switchyard.ledger")

Run = Callable[..., Awaitable[Any]]   # runs a blocking call behind its limiter: (fn, *args)


class StoreWriter:
    def __init__(self, store: UsageStore, quarantine: QuarantineFile, *, run_store: Run, run_file: Run,
                 clock: Callable[[], float]) -> None:
        self.store = store
        self.quarantine = quarantine
        self._run_store = run_store
        self._run_file = run_file
        self._clock = clock
        self._replay_quarantined: set[str] = set()   # record ids of the spill file quarantined already
        # counters, for the metrics
        self.written = 0       # records the store took from a batch
        self.replayed = 0      # records the store took from the spill file
        self.quarantined = 0   # records (and spill-file lines) moved to the quarantine file
        self.dropped = 0       # records the store refused that the quarantine file could not take either

    async def write(self, batch: Sequence[LedgerRecord], *, replay: bool = False) -> tuple[int, Exception | None]:
        """``batch`` into the store: how many of its records, from the first, are settled (in the store, or
        quarantined), and None; or fewer, with the failure that says the store is down."""
        try:
            await self._run_store(self.store.write, batch)
        except RecordRefused:
            pass   # a record of the batch: one at a time, so the others go in
        except Exception as exc:
            return 0, exc
        else:
            self._count(len(batch), replay)
            return len(batch), None
        for i, rec in enumerate(batch):
            failure = await self._write_one(rec, replay)
            if failure is not None:
                return i, failure
        return len(batch), None

    async def down(self) -> Exception | None:
        """None when the store takes a write now (``UsageStore.ping``), else its failure: the probe of an
        outage with nothing to write."""
        try:
            await self._run_store(self.store.ping)
        except Exception as exc:
            return exc
        return None

    async def quarantine_line(self, line: bytes, where: str) -> None:
        """A spill-file line that is not a whole record: kept as it is, never replayed."""
        reason = "not a whole ledger record"
        await self._quarantine(line_entry(line, reason, self._clock()), f"a line of {where}", reason)

    def replay_done(self) -> None:
        """The spill file is gone: its records' ids need not be remembered."""
        self._replay_quarantined.clear()

    async def _write_one(self, rec: LedgerRecord, replay: bool) -> Exception | None:
        if replay and rec.record_id in self._replay_quarantined:
            return None   # quarantined on an earlier pass over this spill file
        reason = ""
        for _ in range(2):   # a second try: a failure of the moment is not the record's
            try:
                await self._run_store(self.store.write, (rec,))
            except RecordRefused as exc:
                reason = str(exc)
            except Exception as exc:
                return exc   # the store is down: this record waits with the rest
            else:
                self._count(1, replay)
                return None
        if replay:
            self._replay_quarantined.add(rec.record_id)
        reason = f"the {self.store.name} store refused it: {reason}"
        await self._quarantine(record_entry(rec, reason, self._clock()),
                               f"record {rec.record_id} of request {rec.request_id}", reason)
        return None

    def _count(self, n: int, replay: bool) -> None:
        if replay:
            self.replayed += n
        else:
            self.written += n

    async def _quarantine(self, entry: dict[str, Any], what: str, reason: str) -> None:
        try:
            kept = await self._run_file(self.quarantine.add, [entry])
        except Exception as exc:
            kept, reason = 0, f"{reason}; writing the quarantine file: {_reason(exc)}"
        if kept:
            self.quarantined += 1
            log.error("usage ledger: %s quarantined to %s (%s)", what, self.quarantine.path, reason)
        else:
            self.dropped += 1
            log.error("usage ledger: %s dropped (%s), and the quarantine file %s is full or failed", what, reason,
                      self.quarantine.path)


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
