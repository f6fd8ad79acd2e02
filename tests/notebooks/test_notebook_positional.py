"""Notebook 03 through the real grader: realistic code edits lose points and are named.

Full marks for the solution, zero for the release and the CI-mode run are checked for every
notebook in test_course_notebooks.py. Each mutated notebook below carries one edit per
exercise (exercises are graded independently), so one grading run checks several mistakes.
"""
import pytest

from helpers import SOLUTIONS, grade_mutant_bank

SOLUTION = SOLUTIONS / "03_positional_encoding" / "positional_encoding.ipynb"

MUTANTS = {  # name: [(grade_id, old, new, exercise id, mistake name the feedback must give)]
    "base, rotation sign, rope pairing": [
        ("positional_sinusoidal", "10000", "1000", "positional.sinusoidal", "base 1000 instead of 10000"),
        ("positional_rotation", "= c, s\n", "= c, -s\n", "positional.rotation", "rotation sign flipped"),
        ("positional_rotation", "= -s, c", "= s, c", None, None),  # second half of the same edit
        ("positional_rope", "0::2]", ": d // 2]", "positional.rope", "RoPE pairing convention mixed"),
        ("positional_rope", "1::2]", "d // 2:]", None, None),
    ],
    "sin/cos order, rope sign": [
        ("positional_sinusoidal", "P[:, 0::2] = np.sin(angles)\n    P[:, 1::2] = np.cos(angles)",
         "P[:, 0::2] = np.cos(angles)\n    P[:, 1::2] = np.sin(angles)",
         "positional.sinusoidal", "sin/cos order swapped"),
        ("positional_rope", "c * x[..., 0::2] - s * x[..., 1::2]", "c * x[..., 0::2] + s * x[..., 1::2]",
         "positional.rope", "rotation sign flipped"),
        ("positional_rope", "= s * x[..., 0::2]", "= -s * x[..., 0::2]", None, None),
    ],
    "exponent per pair": [
        ("positional_sinusoidal", "2 * k / d_model", "k / d_model",
         "positional.sinusoidal", "exponent k/d_model instead of 2k/d_model"),
        ("positional_rotation", "theta = m / 10000", "theta = 1 / 10000",
         "positional.rotation", None),  # angle without m: loses points, no name required
    ],
}


@pytest.mark.parametrize("edits", MUTANTS.values(), ids=MUTANTS.keys())
def test_mutants_lose_points_and_are_named(tmp_path, edits):
    grade_mutant_bank(SOLUTION, edits, tmp_path)
