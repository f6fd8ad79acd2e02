import base64
import json

import numpy as np
import pytest

from autograder.kernel.transport import (COUNTED, NOT_IMPLEMENTED, REFUSED, Listed, OverMemory, Raised,
                                         decode_array, decode_results, encode_array, encode_results)


@pytest.mark.parametrize("a", [np.arange(6.0).reshape(2, 3), np.float32([1.5]), np.array(3),
                               np.array([True, False]), np.arange(4, dtype=np.int64)])
def test_arrays_round_trip_exactly(a):
    b = decode_array(encode_array(a))
    assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)


def test_results_keep_each_kind_of_outcome_in_order():
    results = [(np.ones(2), np.zeros((1, 1))), Raised("ValueError: bad"), (np.eye(2),), NOT_IMPLEMENTED,
               OverMemory(COUNTED, 12345), OverMemory(REFUSED), (np.ones(3).view(Listed),)]
    back = decode_results(json.loads(json.dumps(encode_results("x.y", results))))
    assert back[1] == Raised("ValueError: bad") and back[3] == NOT_IMPLEMENTED and back[3].stub
    assert back[4] == OverMemory(COUNTED, 12345) and back[5] == OverMemory(REFUSED)
    assert np.array_equal(back[0][1], np.zeros((1, 1))) and np.array_equal(back[2][0], np.eye(2))
    assert isinstance(back[6][0], Listed) and not isinstance(back[0][0], Listed)


@pytest.mark.parametrize("forged", [
    "not implemented yet", None, 3, [], {}, {"raised": 3}, {"raised": "x", "stub": "yes"},
    {"raised": "x", "outputs": []}, {"over_memory": {"by": "guessed", "peak": 1}},
    {"over_memory": {"by": "counted", "peak": 1e300}}, {"over_memory": {"by": "counted", "peak": -5}},
    {"over_memory": {"by": "counted", "peak": True}}, {"over_memory": "big"},
    {"outputs": "x"}, {"outputs": [{"dtype": "<f8", "shape": ["inf"], "data": ""}]},
    {"outputs": [{"dtype": "<f8", "shape": [1] * 40, "data": ""}]},
    {"outputs": [], "listed": ["0"]}, {"outputs": [{}] * 100},
])
def test_a_case_whose_entry_cannot_be_read_costs_that_case_alone(forged):
    good = encode_results("x.y", [(np.eye(2),)])["cases"][0]
    back = decode_results({"cases": [good, forged, good]})
    assert np.array_equal(back[0][0], np.eye(2)) and np.array_equal(back[2][0], np.eye(2))
    assert isinstance(back[1], Raised) and not back[1].stub and "could not be read" in back[1].text


@pytest.mark.parametrize("payload", [None, [], {"cases": "all"}, {"exercise": "x.y"}])
def test_a_payload_without_a_list_of_cases_is_refused(payload):
    with pytest.raises(ValueError):
        decode_results(payload)


def test_object_arrays_are_refused():
    forged = {"dtype": "|O", "shape": [1], "data": base64.b64encode(b"\0" * 8).decode()}
    with pytest.raises(ValueError, match="not a plain numeric"):
        decode_array(forged)


def test_size_mismatch_is_refused():
    d = encode_array(np.ones(4))
    d["shape"] = [5]
    with pytest.raises(ValueError):
        decode_array(d)
