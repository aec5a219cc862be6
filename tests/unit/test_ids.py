"""Request and record ids: unique and well-formed, drawn without a system call each."""

import re

from switchyard.actors.ids import random_hex
from switchyard.actors.ledger.record import new_record_id
from switchyard.protocol.http.asgi import new_request_id


def test_request_ids_are_req_and_32_hex_digits_and_never_repeat():
    ids = [new_request_id() for _ in range(20_000)]
    assert all(re.fullmatch(r"req_[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_record_ids_are_unique_and_in_time_order():
    ids = [new_record_id() for _ in range(20_000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert [i[:14] for i in ids] == sorted(i[:14] for i in ids)   # the microseconds come first


def test_random_hex_keeps_leading_zero_bytes():
    # Fixed width whatever the draw: a value below 2**120 still gives 32 digits.
    assert {len(random_hex(16)) for _ in range(5_000)} == {32}
    assert len(random_hex(1)) == 2
