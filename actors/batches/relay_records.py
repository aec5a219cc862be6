"""The ledger records of a relayed batch: one per line of its output file, as the provider wrote it.

A relayed batch's calls never pass through the gateway, so its output file
is what says what they used: each line is ``{"id": "batch_req_...",
"custom_id", "response": {"status_code", "request_id", "body"}, "error"}``
and the body carries the call's ``usage``. Each line becomes a record of
``purpose: batch`` for the batch's owner, on its backend, priced at the
model's pricing with ``pricing.batch_discount`` taken off (the Batch API's
lower price). Lines are read as the file's bytes arrive, so an output file of
any size costs only its records in memory. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from switchyard.actors.batches.records import Batch
from switchyard.actors.json_read import loads
from switchyard.actors.ledger.counts import TokenCounts, counts_of
from switchyard.actors.ledger.entries import endpoint_of
from switchyard.actors.ledger.pricing import cost_of
from switchyard.actors.ledger.record import LedgerRecord
from switchyard.config.metadata import Pricing

PURPOSE = "batch"


class OutputRecords:
    """Fed an output file's bytes in order; ``records`` holds one record per complete line read."""

    def __init__(self, batch: Batch, backend: str, pricing: Pricing | None, organization: str | None,
                 at: float) -> None:
        self.batch, self.backend, self.pricing = batch, backend, pricing
        self.organization, self.at = organization, at   # at: when the batch ended (the records' time)
        self.records: list[LedgerRecord] = []
        self.skipped = 0     # lines that were not an output line's JSON object
        self._rest = b""

    def feed(self, chunk: bytes) -> None:
        *whole, self._rest = (self._rest + chunk).split(b"\n")
        for raw in whole:
            self._line(raw)

    def end(self) -> list[LedgerRecord]:
        """The records, the last line read even without its newline."""
        rest, self._rest = self._rest, b""
        self._line(rest)
        return self.records

    def _line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            line = loads(raw)
        except ValueError:
            line = None
        if not isinstance(line, dict):
            self.skipped += 1
            return
        self.records.append(self._record(line))

    def _record(self, line: dict[str, Any]) -> LedgerRecord:
        batch = self.batch
        response = _object(line.get("response"))
        body = _object(response.get("body"))
        status = response.get("status_code")
        error = line.get("error") if isinstance(line.get("error"), dict) else None
        counts = counts_of(body.get("usage")) or TokenCounts()
        cost = cost_of(self.pricing, counts, batch=True)
        ident = line.get("id") if isinstance(line.get("id"), str) and line.get("id") else \
            f"{batch.id}/{line.get('custom_id')}"
        return LedgerRecord(
            request_id=ident, time=self.at, key_id=batch.owner or None, organization_id=self.organization,
            endpoint=endpoint_of(batch.endpoint), model=batch.model, served_model=batch.model,
            backend=self.backend, attempts=1,
            status=status if isinstance(status, int) and not isinstance(status, bool) else 500,
            error_code=str(error.get("code")) if error is not None and error.get("code") is not None else None,
            input_tokens=counts.input, output_tokens=counts.output, cached_tokens=counts.cached,
            cache_write_tokens=counts.cache_write, reasoning_tokens=counts.reasoning,
            cost=None if cost is None else float(cost), purpose=PURPOSE)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
