"""Notebook 04 through the real grader: realistic code edits lose points and are named.

Full marks for the solution, zero for the release and the CI-mode run are checked for every
notebook in test_course_notebooks.py. Edits are grouped so that no edit changes what another
graded exercise of the same notebook computes (the blocks call the learner's layer norm and
FFN; the backward uses the learner's forward cache).
"""
import pytest

from helpers import SOLUTIONS, grade_mutant_bank

SOLUTION = SOLUTIONS / "04_layer_norm" / "layer_norm.ipynb"
DX = "dx = inv_std * (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))"

MUTANTS = {  # name: [(grade_id, old, new, exercise id, mistake name the feedback must give)]
    "unbiased variance, no ReLU": [
        ("layernorm_forward", "x.var(axis=-1, keepdims=True)", "x.var(axis=-1, keepdims=True, ddof=1)",
         "layernorm.forward", "unbiased variance"),
        ("layernorm_ffn", "np.maximum(x @ W1 + b1, 0)", "x @ W1 + b1", "layernorm.ffn", "ReLU left out"),
    ],
    "constant statistics, block orders": [
        ("layernorm_backward", DX, "dx = inv_std * g", "layernorm.backward",
         "backward that treats mean and variance as constants"),
        ("layernorm_post_ln", "layernorm_forward(x + ffn_forward(x, W1, b1, W2, b2)[0], gamma, beta)[0]",
         "x + ffn_forward(layernorm_forward(x, gamma, beta)[0], W1, b1, W2, b2)[0]",
         "layernorm.post_ln", "Pre-LN order in the Post-LN block"),
        ("layernorm_pre_ln", "return x + ffn", "return h + ffn", "layernorm.pre_ln",
         "residual added after the norm in a Pre-LN block"),
    ],
    "gamma/beta swapped in forward and backward": [
        ("layernorm_forward", "gamma * x_hat + beta", "beta * x_hat + gamma",
         "layernorm.forward", "gamma and beta swapped"),
        ("layernorm_backward", "return dx, dgamma, dbeta", "return dx, dbeta, dgamma",
         "layernorm.backward", "dgamma and dbeta swapped"),
    ],
    "eps outside the square root": [
        ("layernorm_forward", "np.sqrt(var + eps)", "(np.sqrt(var) + eps)",
         "layernorm.forward", "eps outside the square root"),
    ],
}


@pytest.mark.parametrize("edits", MUTANTS.values(), ids=MUTANTS.keys())
def test_mutants_lose_points_and_are_named(tmp_path, edits):
    grade_mutant_bank(SOLUTION, edits, tmp_path)
