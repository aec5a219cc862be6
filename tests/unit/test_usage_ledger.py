"""Usage records and the per-purpose ledger."""

from __future__ import annotations

import pytest

from switchyard.actors.usage import OUTCOMES, RECENT, UsageLedger, UsageRecord


def rec(purpose: str = "classifier", n: int = 0, outcome: str = "ok", tokens: tuple[int, int] = (10, 2)) -> UsageRecord:
    return UsageRecord(purpose=purpose, request_id=f"req-{n}", key_id=None, backend="b", model="m",
                       input_tokens=tokens[0], output_tokens=tokens[1], latency_seconds=0.1, outcome=outcome,
                       status=200)


def test_purposes_are_totalled_apart_and_never_summed():
    ledger = UsageLedger()
    ledger.record(rec("client", tokens=(100, 50)))
    ledger.record(rec("classifier", tokens=(30, 5)))
    ledger.record(rec("classifier", tokens=(20, 4)))
    assert ledger.by_purpose() == {
        "client": {"requests": 1, "input_tokens": 100, "output_tokens": 50, "errors": 0},
        "classifier": {"requests": 2, "input_tokens": 50, "output_tokens": 9, "errors": 0},
    }


@pytest.mark.parametrize("outcome", [o for o in OUTCOMES if o != "ok"])
def test_every_outcome_but_ok_counts_as_an_error_and_its_tokens_still_count(outcome):
    ledger = UsageLedger()
    ledger.record(rec(outcome=outcome, tokens=(7, 0)))
    assert ledger.by_purpose()["classifier"] == {"requests": 1, "input_tokens": 7, "output_tokens": 0, "errors": 1}


def test_recent_gives_the_last_n_records_oldest_first():
    ledger = UsageLedger()
    for n in range(5):
        ledger.record(rec(n=n))
    assert [r.request_id for r in ledger.recent(3)] == ["req-2", "req-3", "req-4"]
    assert len(ledger.recent(50)) == 5 and ledger.recent(0) == []


def test_only_the_last_1000_records_are_kept_but_totals_count_all():
    ledger = UsageLedger()
    for n in range(RECENT + 5):
        ledger.record(rec(n=n))
    kept = ledger.recent(RECENT + 5)
    assert RECENT == 1000 and len(kept) == RECENT
    assert kept[0].request_id == "req-5" and kept[-1].request_id == f"req-{RECENT + 4}"
    assert ledger.by_purpose()["classifier"]["requests"] == RECENT + 5


def test_by_purpose_is_a_copy_the_caller_cannot_corrupt():
    ledger = UsageLedger()
    ledger.record(rec())
    ledger.by_purpose()["classifier"]["requests"] = 99
    assert ledger.by_purpose()["classifier"]["requests"] == 1


def test_an_empty_ledger_has_no_purposes():
    assert UsageLedger().by_purpose() == {} and UsageLedger().recent(10) == []
