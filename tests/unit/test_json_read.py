"""JSON read by msgspec where it can, with json's values and errors always."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.actors.json_read import loads, loads_utf8

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_a_json_value_reads_as_json_reads_it(value):
    for data in (json.dumps(value).encode(), json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")):
        expected = repr(json.loads(data))   # repr: -0.0 stays -0.0, an integer stays one
        assert repr(loads(data)) == expected and repr(loads(data.decode("utf-8", "surrogatepass"))) == expected
        try:
            text = data.decode()
        except UnicodeDecodeError:   # a lone surrogate written raw: not UTF-8, refused as json refuses it
            with pytest.raises(ValueError):
                loads_utf8(data)
            continue
        assert repr(loads_utf8(data)) == repr(json.loads(text))


@pytest.mark.parametrize("text", [b'{"x": NaN}', b'{"x": 123456789012345678901234567890}',
                                  b'{"x": "\\ud800"}', b'{"a": 1, "a": 2}', b'[1e400]'])
def test_edge_values_read_as_json_reads_them(text):
    assert repr(loads_utf8(text)) == repr(json.loads(text.decode()))
    assert repr(loads(text)) == repr(json.loads(text))


def test_a_body_in_utf16_is_sniffed_as_json_does_but_utf8_data_is_utf8_only():
    data = json.dumps({"a": "é"}).encode("utf-16")
    assert loads(data) == {"a": "é"}
    with pytest.raises(ValueError):
        loads_utf8(data)


@pytest.mark.parametrize("text", [b'{"a": 1', b'\xff{}', b'', b'{"a": 1} x'])
def test_what_is_not_json_raises_a_value_error(text):
    with pytest.raises(ValueError):
        loads_utf8(text)
    with pytest.raises(ValueError):
        loads(text)
