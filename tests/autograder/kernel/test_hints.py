"""autograder.kernel.hints: each learner function below is compiled under a notebook cell's file name
and registered in linecache, as ipykernel does, then run through ``calls.run`` as the kernel
runs it, so the real numpy error and the real traceback reach ``describe_error``."""
import ast
import linecache
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

from autograder.kernel import hints
from autograder.kernel.calls import run
from autograder.kernel.hints import describe_error, returned_tuple_hint

rng = np.random.default_rng(0)


def cell(source: str, filename: str | None = None) -> dict:
    """Run ``source`` as a notebook cell would; its namespace."""
    source = textwrap.dedent(source).lstrip("\n")
    filename = filename or f"/tmp/ipykernel_4242/{zlib.crc32(source.encode())}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"np": np}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def hint_for(source: str, function: str, signature: str | None = None, **case) -> str:
    """The text for the error ``function`` (defined in ``source``) raises on ``case``."""
    namespace = cell(source)
    try:
        run(namespace, function, None, case)
    except Exception as err:
        text = describe_error(err, function, signature)
        assert text == hints._describe(err, function, signature)  # not the fallback
    else:
        pytest.fail(f"{function} did not raise")
    assert len(text) <= hints.MAX_CHARS and "\n" not in text and "Traceback" not in text
    return text


LAYERNORM = """
def layernorm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1)
    var = x.var(axis=-1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + eps)
    return gamma * xhat + beta
"""


def test_reduction_without_keepdims_names_the_axis_and_the_line():
    text = hint_for(LAYERNORM, "layernorm_forward", x=rng.normal(size=(2, 3, 4)),
                    gamma=np.ones(4), beta=np.zeros(4))
    assert text.startswith("ValueError: shapes (2,3,4) and (2,3) do not broadcast")
    assert "line 4 of your `layernorm_forward`" in text
    assert "`xhat = (x - mu) / np.sqrt(var + eps)`" in text
    assert "`mu` (2,3)" in text and "axis -1" in text
    assert "keepdims=True" in text and "(2,3,1)" in text


def test_a_slice_of_the_wrong_length_is_not_told_keepdims():
    """P[:len(ids)] takes B rows where T belong: (B, d) against (B, T, d) looks like a reduction
    over T, but no sum/mean/max made it, so the hint names the axis and claims no fix."""
    source = """
    def embed(ids, W_E, P):
        return W_E[ids] + P[:len(ids)]
    """
    text = hint_for(source, "embed", ids=rng.integers(0, 6, size=(2, 5)), W_E=rng.normal(size=(6, 4)),
                    P=rng.normal(size=(8, 4)))
    assert "(2,4) lacks axis -2 of (2,5,4)" in text and "keepdims" not in text
    named = """
    def embed(ids, W_E, P):
        pos = P[:len(ids)]
        return W_E[ids] + pos
    """
    text = hint_for(named, "embed", ids=rng.integers(0, 6, size=(2, 5)), W_E=rng.normal(size=(6, 4)),
                    P=rng.normal(size=(8, 4)))
    assert "`pos` (2,4) lacks axis -2" in text and "keepdims" not in text


def test_reduction_over_a_middle_axis():
    source = """
    def center_over_time(x):
        return x - x.mean(axis=1)
    """
    text = hint_for(source, "center_over_time", x=rng.normal(size=(2, 3, 4)))
    assert "axis -2" in text and "keepdims=True" in text and "(2,1,4)" in text
    assert "line 2 of your `center_over_time`" in text


ATTENTION = """
def attention_forward(Q, K, V, mask=None):
    d_k = Q.shape[-1]
    S = Q @ K.T / np.sqrt(d_k)
    A = np.exp(S - S.max(axis=-1, keepdims=True))
    A = A / A.sum(axis=-1, keepdims=True)
    return A @ V, A
"""


def test_batched_transpose_in_matmul_suggests_swapaxes():
    Q = K = V = rng.normal(size=(2, 5, 4))
    text = hint_for(ATTENTION, "attention_forward", Q=Q, K=K, V=V)
    assert "line 3 of your `attention_forward`: `S = Q @ K.T / np.sqrt(d_k)`" in text
    assert "A's last axis (4) differs from B's second-to-last (5)" in text
    assert "np.swapaxes(K, -1, -2)" in text and "(2,5,4)" in text


def test_batched_transpose_with_square_matrices_fails_on_batch_axes():
    Q = K = V = rng.normal(size=(2, 4, 4))  # T == d_k: the core sizes agree, the batch does not
    text = hint_for(ATTENTION, "attention_forward", Q=Q, K=K, V=V)
    assert "batch axes (2,) and (4,) of a matmul differ" in text and "np.swapaxes(K, -1, -2)" in text


def test_plain_matmul_mismatch_lists_the_shapes_in_the_line():
    source = """
    def linear(x, W, b):
        # a projection
        return x @ W + b
    """
    text = hint_for(source, "linear", x=np.ones((3, 5)), W=np.ones((4, 2)), b=np.zeros(2))
    assert "at `x @ W`" in text
    assert "A's last axis (5) differs from B's second-to-last (4)" in text
    assert "`x` (3,5), `W` (4,2)" in text and "line 3 of your `linear`" in text
    assert "swapaxes" not in text


LAYERNORM_WITH_CACHE = """
def layernorm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    xhat = (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    return gamma * xhat + beta, (xhat, gamma)
"""


@pytest.mark.parametrize("body", ["return h @ W", "B, T, D = h.shape\n    return h @ W",
                                  "return np.maximum(h * 2.0, 0) @ W"])
def test_tuple_used_as_an_array_says_unpack(body):
    source = LAYERNORM_WITH_CACHE + f"""
def block_forward(x, gamma, beta, W):
    h = layernorm_forward(x, gamma, beta)
    {body}
"""
    text = hint_for(source, "block_forward", x=rng.normal(size=(2, 3, 4)), gamma=np.ones(4),
                    beta=np.zeros(4), W=np.ones((4, 4)))
    assert "`h` is a tuple" in text and "out, cache = ..." in text
    assert "of your `block_forward`" in text


def test_matmul_with_a_number():
    source = """
    def scale(x, c):
        return x @ c
    """
    assert "with `*`" in hint_for(source, "scale", x=np.ones((2, 3)), c=2.0)


def test_shape_called_like_a_method():
    source = """
    def n_tokens(x):
        return x.shape(1)
    """
    assert "`x.shape[0]`" in hint_for(source, "n_tokens", x=np.ones((2, 3)))


def test_function_that_forgot_return():
    source = """
    def softmax(z):
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        e / e.sum(axis=-1, keepdims=True)

    def attention_weights(S):
        A = softmax(S)
        return A.T
    """
    text = hint_for(source, "attention_weights", S=np.ones((2, 3)))
    assert "`A` is None" in text and "`return`" in text


def test_reshape_of_the_wrong_size():
    source = """
    def split_heads(x, n_heads):
        B, T, d_model = x.shape
        d_k = d_model // n_heads
        return x.reshape(B, T, n_heads, d_model)  # (B, T, n_heads, d_k) was meant
    """
    text = hint_for(source, "split_heads", x=np.ones((2, 3, 8)), n_heads=2)
    assert "cannot reshape 48 elements into (2,3,2,8)" in text
    assert "holds 96" in text and "product of the new shape" in text
    assert "line 4 of your `split_heads`: `return x.reshape(B, T, n_heads, d_model)`)" in text


def test_reshape_with_minus_one_that_does_not_divide():
    source = """
    def split_heads(x, n_heads):
        return x.reshape(x.shape[0], -1, 5)
    """
    text = hint_for(source, "split_heads", x=np.ones((2, 3, 8)), n_heads=2)
    assert "48 is not a multiple of 10" in text and "(2,-1,5)" in text


def test_name_defined_only_in_a_teaching_cell():
    source = """
    def scaled_scores(Q, K):
        return Q @ np.swapaxes(K, -1, -2) * scale
    """
    text = hint_for(source, "scaled_scores", Q=np.ones((2, 3)), K=np.ones((2, 3)))
    assert text.startswith("NameError: `scale` is not defined")
    assert "solution cell" in text and "line 2 of your `scaled_scores`" in text


def test_local_used_before_assignment():
    source = """
    def total(x):
        if x.sum() < 0:
            s = 0.0
        return s
    """
    assert "`s` is used in your function before" in hint_for(source, "total", x=np.ones(2))


def test_missing_function_keeps_the_graders_own_message():
    try:
        run({}, "attention_forward", None, {})
    except NameError as err:
        text = describe_error(err, "attention_forward")
    assert "`attention_forward` is not defined when its graded cell runs" in text


def test_wrong_parameter_names_show_the_signature():
    source = """
    def attention_forward(q, k, v):
        return q
    """
    signature = "attention_forward(Q, K, V, mask=None) -> (out, A)"
    text = hint_for(source, "attention_forward", signature, Q=np.ones(2), K=np.ones(2), V=np.ones(2))
    assert "unexpected keyword argument 'Q'" in text and signature in text
    text = hint_for(source, "attention_forward", None, q=np.ones(2), k=np.ones(2), v=np.ones(2),
                    mask=None)
    assert "parameter names" in text


def test_wrong_arguments_to_numpy_name_the_numpy_function():
    source = """
    def scores(Q, K):
        return Q @ np.swapaxes(K)
    """
    text = hint_for(source, "scores", Q=np.ones((2, 3)), K=np.ones((2, 3)))
    assert "arguments you pass to `swapaxes`" in text and "line 2 of your `scores`" in text


@pytest.mark.parametrize("call, fix", [("x.mean(dim=-1)", "`axis=`"),
                                       ("x.max(axis=-1, keepdim=True)", "`keepdims=`"),
                                       ("x.unsqueeze(-1)", "np.expand_dims"),
                                       ("np.softmax(x)", "`np.softmax`")])
def test_pytorch_habits(call, fix):
    source = f"""
    def f(x):
        return {call}
    """
    assert fix in hint_for(source, "f", x=np.ones((2, 3)))


def test_axis_out_of_bounds_suggests_negative_axes():
    source = """
    def softmax(z):
        e = np.exp(z - z.max(axis=2, keepdims=True))
        return e / e.sum(axis=2, keepdims=True)
    """
    text = hint_for(source, "softmax", z=np.ones((2, 3)))
    assert "axis 2 does not exist in a 2-D array" in text and "-1" in text and "batched" in text


def test_swapaxes_out_of_bounds_and_too_many_indices():
    source = """
    def last_token(x):
        return np.swapaxes(x, 2, 1)[:, :, -1]
    """
    assert "axis 2 does not exist in a 2-D array" in hint_for(source, "last_token", x=np.ones((2, 3)))
    source = """
    def last_token(x):
        return x[:, -1, :]
    """
    text = hint_for(source, "last_token", x=np.ones((2, 3)))
    assert "3 indices for a 2-D array" in text and "x[..., i]" in text


def test_index_and_transpose_errors():
    source = """
    def pick(x):
        return x[:, 5]
    """
    assert "valid indices are 0 to 2" in hint_for(source, "pick", x=np.ones((2, 3)))
    source = """
    def flip(x):
        return x.transpose(0, 2, 1)
    """
    assert "np.swapaxes(x, -1, -2)" in hint_for(source, "flip", x=np.ones((2, 3)))


def test_concatenate_and_stack_errors():
    source = """
    def join(a, b):
        return np.concatenate([a, b])
    """
    text = hint_for(source, "join", a=np.ones((2, 3)), b=np.ones((2, 4)))
    assert "differ along axis 1 (3 vs 4)" in text and "`axis=`" in text
    text = hint_for(source, "join", a=np.ones((2, 3)), b=np.ones(3))
    assert "array 0 is 2-D and array 1 is 1-D" in text
    source = """
    def join(a, b):
        return np.stack([a, b])
    """
    assert "`np.stack` needs arrays of one shape" in hint_for(source, "join", a=np.ones(2), b=np.ones(3))


def test_division_by_zero_and_overflow():
    source = """
    def mean_length(lengths):
        return sum(lengths) / len(lengths)
    """
    assert "length or count 0" in hint_for(source, "mean_length", lengths=[])
    source = """
    def softmax(z):
        with np.errstate(over="raise"):
            e = np.exp(z)
        return e / e.sum()
    """
    assert "subtract the max" in hint_for(source, "softmax", z=np.array([1000.0, 0.0]))


def test_error_in_a_comprehension_is_numbered_within_the_function():
    source = """
    def stack_heads(heads):
        n = len(heads)
        return [h.reshape(3, 3) for h in heads]
    """
    text = hint_for(source, "stack_heads", heads=[np.ones(4)])
    assert "line 3 of your `stack_heads`" in text


def test_older_ipython_cell_names_count_too():
    namespace = cell("def f(x):\n    return x @ x\n", "<ipython-input-3-5f2a3c1d0e9b>")
    try:
        namespace["f"](np.ones((2, 3)))
    except ValueError as err:
        assert "line 2 of your `f`: `return x @ x`" in describe_error(err, "f")


def test_unknown_errors_keep_type_first_line_and_learner_line():
    source = """
    def f(x):
        raise KeyError("no such head\\nsecond line")
    """
    text = hint_for(source, "f", x=1)
    assert text == "KeyError: 'no such head\\nsecond line' (line 2 of your `f`: " \
                   "`raise KeyError(\"no such head\\nsecond line\")`)"


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")


@pytest.mark.parametrize("err", [ValueError("operands could not be broadcast together with shapes (2,3,4) (2,3)"),
                                 Unprintable(), ValueError("größe ≠ 3 — ✗\n" + "x" * 5000),
                                 TypeError("f() missing 1 required positional argument: 'x'"),
                                 NameError("name 'q' is not defined"), KeyboardInterrupt(),
                                 AttributeError("'tuple' object has no attribute 'shape'")])
def test_describe_error_never_raises_and_stays_short(err):
    text = describe_error(err, "f")
    assert isinstance(text, str) and 0 < len(text) <= hints.MAX_CHARS and "\n" not in text


def test_describe_error_survives_a_frame_without_source_and_a_hostile_array():
    class Hostile(np.ndarray):
        @property
        def shape(self):
            raise RuntimeError("no shape for you")
    namespace = cell("def f(x, y):\n    return x + y\n", "/tmp/ipykernel_1/999.py")
    linecache.cache.pop("/tmp/ipykernel_1/999.py")  # the cell's text is gone
    try:
        namespace["f"](np.ones((2, 3)).view(Hostile), np.ones(4))
    except Exception as err:
        text = describe_error(err, "f")
        assert text == hints._describe(err, "f", None)  # the subclass's `shape` was never read
    assert text.startswith("ValueError: shapes (2,3) and (4,) do not broadcast (line 2 of your `f`)")


def test_returned_tuple_hint():
    assert "`return out`" in returned_tuple_hint(2, 1)
    assert "return out, cache" in returned_tuple_hint(1, 2)
    assert "3 values where 2" in returned_tuple_hint(3, 2)
    assert returned_tuple_hint(2, 2) is None


def test_module_imports_only_the_standard_library_and_numpy():
    tree = ast.parse(Path(hints.__file__).read_text())
    top = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            top |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            top.add(node.module.split(".")[0])
    assert top - set(sys.stdlib_module_names) == {"numpy"}


def test_an_empty_sequence_is_not_taken_for_a_tuple_to_unpack():
    from autograder.kernel.hints import describe_error

    namespace = cell("def beam_search(scores):\n    finished = ()  # no beam finished\n"
                     "    return min(finished)\n")
    try:
        namespace["beam_search"](np.zeros(2))
    except ValueError as err:
        line = describe_error(err, "beam_search")
    assert "empty sequence" in line and "unpack" not in line, line


@pytest.mark.parametrize("text, limit, shown", [
    ("Short enough.", 20, "Short enough."),
    ("One short sentence. Another, much too long to fit.", 30, "One short sentence."),
    ("a tuple whose first element is the output, e.g. `return out, cache`", 40, "a tuple whose first element is the…"),
    ("a tuple whose first element is the output, e.g. `return out, cache`", 45, "a tuple whose first element is the output…"),
    ("a_single_identifier_far_longer_than_the_limit", 20, "a_single_identifier…"),
])
def test_shorten_cuts_at_a_sentence_or_a_word(text, limit, shown):
    assert hints.shorten(text, limit) == shown
    assert len(shown) <= limit


def test_a_long_error_is_quoted_to_a_whole_word():
    err = ValueError("the exercise asks for a tuple whose first element is the output of the layer, and "
                     "its second the cache that the backward pass reads, e.g. `return out, cache`")
    text = describe_error(err, "layer_forward")
    assert text.endswith("\u2026") and len(text) <= hints.MAX_CHARS
    last = text[:-1].split()[-1]
    assert last in str(err).split(), text
