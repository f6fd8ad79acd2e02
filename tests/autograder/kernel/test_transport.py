import base64

import numpy as np
import pytest

from autograder.kernel.transport import decode_array, decode_results, encode_array, encode_results


@pytest.mark.parametrize("a", [np.arange(6.0).reshape(2, 3), np.float32([1.5]), np.array(3),
                               np.array([True, False]), np.arange(4, dtype=np.int64)])
def test_arrays_round_trip_exactly(a):
    b = decode_array(encode_array(a))
    assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)


def test_results_keep_errors_and_outputs_in_order():
    results = [(np.ones(2), np.zeros((1, 1))), "ValueError: bad", (np.eye(2),)]
    back = decode_results(encode_results("x.y", results))
    assert back[1] == "ValueError: bad"
    assert np.array_equal(back[0][1], np.zeros((1, 1))) and np.array_equal(back[2][0], np.eye(2))


def test_object_arrays_are_refused():
    forged = {"dtype": "|O", "shape": [1], "data": base64.b64encode(b"\0" * 8).decode()}
    with pytest.raises(ValueError, match="not a plain numeric"):
        decode_array(forged)


def test_size_mismatch_is_refused():
    d = encode_array(np.ones(4))
    d["shape"] = [5]
    with pytest.raises(ValueError):
        decode_array(d)
