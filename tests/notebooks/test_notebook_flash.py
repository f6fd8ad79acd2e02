"""Notebook 07 through the real grader: realistic code edits lose points and are named.

Full marks for the solution, zero for the release and the CI-mode run are checked for every
notebook in test_course_notebooks.py. Each grading run edits all three exercises at once
(the online softmax, the tiled forward, the tiled backward); ``grade_mutant_bank`` checks
that each loses points and that its feedback names the mistake.
"""
import pytest

from helpers import SOLUTIONS, grade_mutant_bank

SOLUTION = SOLUTIONS / "07_fast_attention" / "fast_attention.ipynb"

MUTANTS = {  # name: [(grade_id, old, new, exercise id, mistake name the feedback must give)]
    "the rescaling, the running output and delta": [
        ("flash_online_softmax", "np.exp(m - shift) * l", "l", "flash.online_softmax",
         "normaliser not rescaled when the maximum changes"),
        ("flash_forward", "acc = alpha[..., None] * acc + A_tilde", "acc = acc + A_tilde", "flash.forward",
         "running output not rescaled"),
        ("flash_backward", "dS = A * (dA - delta[..., q0:q0 + rows, None])",
         "dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))", "flash.backward",
         "delta computed from the tile's weights instead of rowsum(dout ∘ out)"),
    ],
    "the last block, the causal alignment and a transpose": [
        ("flash_online_softmax", "range(0, s.shape[-1], block_k)",
         "range(0, s.shape[-1] - block_k + 1, block_k)", "flash.online_softmax",
         "last, shorter block skipped"),
        ("flash_forward", "q0 + rows + T_k - T_q", "q0 + rows", None, None),
        ("flash_forward", "[:, None] + T_k - T_q", "[:, None]", "flash.forward",
         "causal mask aligned top-left instead of bottom-right"),
        ("flash_backward", "np.swapaxes(dS, -1, -2) @ Qi", "dS @ Qi", "flash.backward",
         "dK accumulated without the transpose"),
    ],
}


@pytest.mark.parametrize("edits", MUTANTS.values(), ids=MUTANTS.keys())
def test_mutants_lose_points_and_are_named(tmp_path, edits):
    grade_mutant_bank(SOLUTION, edits, tmp_path)
