"""The one reader of what crosses from the sandbox: plain data within strict limits, or ``Unreadable``."""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from autograder.kernel import wire
from autograder.kernel.transport import (Raised, decode_ask, decode_results, encode_array, encode_ask,
                                         encode_results)

DEEP = 10 ** 6


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"peak": -Infinity}', '{"a": [1, NaN]}'])
def test_the_tokens_json_adds_for_non_finite_numbers_are_refused(text):
    with pytest.raises(wire.Unreadable, match="not a number JSON allows"):
        wire.loads(text)


def test_a_float_too_large_to_be_finite_is_refused():
    with pytest.raises(wire.Unreadable, match="too large"):
        wire.loads('{"rtol": 1e999}')


@pytest.mark.parametrize("opening, closing", [("[", "]"), ('{"a":', "}")])
def test_nesting_a_million_deep_is_refused_without_reaching_pythons_stack(opening, closing):
    with pytest.raises(wire.Unreadable, match="deep"):
        wire.loads(opening * DEEP + "0" + closing * DEEP)
    deep = current = []
    for _ in range(DEEP):  # already parsed (a payload the kernel's client read): walked, not recursed
        current.append([])
        current = current[0]
    with pytest.raises(wire.Unreadable, match="deep"):
        wire.check({"cases": deep})


def test_nesting_within_the_limit_is_read():
    text = "[" * (wire.MAX_DEPTH - 1) + "]" * (wire.MAX_DEPTH - 1)
    assert wire.loads(text) is not None


@pytest.mark.parametrize("digits", [20, 10 ** 5])
def test_an_integer_of_more_digits_than_an_int64_has_is_refused(digits):
    with pytest.raises(wire.Unreadable, match="integer"):
        wire.loads('{"ask": ' + "9" * digits + "}")
    with pytest.raises(wire.Unreadable, match="integer"):
        wire.check({"ask": 10 ** min(digits, 4000)})


def test_int64s_at_both_ends_of_their_range_are_read():
    assert wire.loads(json.dumps([2 ** 63 - 1, -2 ** 63])) == [2 ** 63 - 1, -2 ** 63]


@pytest.mark.parametrize("text", ['{"results": [1, 2', '{"ask": 0, "prefixes"', "", "{", b"\xff\xfe",
                                  '{"a": 1} trailing', "'single'"])
def test_truncated_or_broken_text_is_unreadable(text):
    with pytest.raises(wire.Unreadable):
        wire.loads(text)


def test_a_message_larger_than_the_limit_is_refused_before_it_is_parsed():
    with pytest.raises(wire.Unreadable, match="bytes"):
        wire.loads(b'"' + b"x" * 100 + b'"', max_bytes=50)


@pytest.mark.parametrize("data", [{1: "int key"}, (1, 2), {1.5}, b"bytes", float("nan"), [float("inf")],
                                  np.float64(1.0), object()])
def test_check_refuses_whatever_json_would_not_carry(data):
    with pytest.raises(wire.Unreadable):
        wire.check(data)


def test_dumps_refuses_non_finite_numbers_instead_of_writing_tokens_loads_refuses():
    with pytest.raises(ValueError):
        wire.dumps({"x": float("nan")})


def test_a_request_of_the_model_round_trips_and_anything_else_is_unreadable():
    case, prefixes = decode_ask(wire.loads(wire.dumps(encode_ask(3, np.array([[1, 4]])))))
    assert case == 3 and prefixes.tolist() == [[1, 4]]
    assert decode_ask(encode_ask(0, 7))[1].shape == ()  # a scalar by mistake: the model says what it takes
    for wrong in ([], {"ask": "0", "prefixes": encode_array(np.zeros(1))}, {"ask": 0},
                  {"ask": [0], "prefixes": encode_array(np.zeros(1))},
                  {"ask": 0, "prefixes": {"dtype": "<i8", "shape": [10 ** 18, 10 ** 18], "data": ""}},
                  {"ask": 0, "prefixes": {"dtype": "|O", "shape": [1], "data": ""}}):
        with pytest.raises(wire.Unreadable):
            decode_ask(wrong)


def test_a_payload_deeper_than_the_limit_is_unreadable_as_a_whole():
    payload = encode_results("x", [(np.zeros(2),)])
    payload["fixes"] = json.loads("[" * 40 + "]" * 40)
    with pytest.raises(wire.Unreadable):
        decode_results(payload)


# --- fuzz: nothing but ``Unreadable`` ever comes out of a reader ---------------------------------

plain = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                                 max_size=4),
                     max_leaves=30)
TOKENS = ["[", "]", "{", "}", ",", ":", '"a"', "0", "-1", "1e999", "NaN", "Infinity", "-Infinity", "true",
          "null", '"\\u00', "9" * 30, "1.5", " "]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=60) | st.text(max_size=200).map(lambda t: [t]))
def test_loads_of_any_text_gives_checked_data_or_unreadable(pieces):
    text = "".join(pieces)
    try:
        data = wire.loads(text)
    except wire.Unreadable:
        return
    assert wire.check(data) is data


@settings(max_examples=200, deadline=None)
@given(plain, st.integers(0, 40))
def test_loads_of_dumped_data_gives_it_back_or_unreadable_and_truncation_never_escapes(data, cut):
    try:
        text = wire.dumps(data)
    except ValueError:  # a non-finite float: dumps refuses it
        return
    try:
        assert wire.loads(text) == data
    except wire.Unreadable:
        pass  # an integer beyond int64, nesting deeper than allowed
    try:
        wire.loads(text[:max(0, len(text) - cut)])
    except wire.Unreadable:
        pass


@settings(max_examples=200, deadline=None)
@given(plain)
def test_decode_results_of_any_payload_gives_outcomes_or_unreadable(data):
    payload = {"exercise": "x", "cases": [data, {"outputs": [data]}, {"raised": data}, {"over_memory": data}]}
    try:
        results = decode_results(payload)
    except wire.Unreadable:
        return
    assert len(results) == 4 and all(isinstance(r, (tuple, Raised)) or r.__class__.__name__ == "OverMemory"
                                     for r in results)
