"""Notebook 04: realistic code edits lose points and are named (through the real grader), and
what the text says the figures of §6 show holds in CI mode (and in full mode, on request).

Full marks for the solution, zero for the release and the CI-mode run are checked for every
notebook in test_course_notebooks.py. Edits are grouped so that no edit changes what another
graded exercise of the same notebook computes (the blocks call the learner's layer norm and
FFN; the backward uses the learner's forward cache).
"""
import numpy as np
import pytest

from helpers import MODES, SOLUTIONS, claim, grade_mutant_bank, solution_run

ASSIGNMENT = "04_layer_norm"
SOLUTION = SOLUTIONS / ASSIGNMENT / "layer_norm.ipynb"
DX = "dx = inv_std * (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))"

MUTANTS = {  # name: [(grade_id, old, new, exercise id, mistake name the feedback must give)]
    "unbiased variance, no ReLU": [
        ("layernorm_forward", "x.var(axis=-1, keepdims=True)", "x.var(axis=-1, keepdims=True, ddof=1)",
         "layernorm.forward", "unbiased variance"),
        ("layernorm_ffn", "np.maximum(x @ W1 + b1, 0)", "x @ W1 + b1", "layernorm.ffn", "ReLU left out"),
        # the forward centres the caller's x in place: the Pre-LN residual then adds the changed x
        ("layernorm_forward", "    x_hat = (x - mu) / np.sqrt(var + eps)", "    x -= mu\n    x_hat = x / np.sqrt(var + eps)",
         "layernorm.pre_ln", "changes its input `x` in place"),
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


# --- what the text says the figures and printed numbers show (issue 24, item 7) ---

def test_section_6_says_what_the_gradient_depth_profile_shows():
    claim(SOLUTION, "the Post-LN curves rise from layer 1 to layer 6 (not at every layer), and at layer 6 "
                    "they are about twice as high as Pre-LN's (1.8 times for attention, 2.3 for the FFN)")
    claim(SOLUTION, "the Pre-LN curves do not rise: they fall towards the top, the FFN's to about half its "
                    "value at layer 1")
    norms = solution_run(ASSIGNMENT)[1]["norms"]              # {order: {sublayer: per layer}}
    post, pre = norms["post-LN"], norms["pre-LN"]
    for sublayer, ratio in (("attention", 1.8), ("ffn", 2.3)):
        assert post[sublayer][-1] > post[sublayer][0] and pre[sublayer][-1] < pre[sublayer][0]
        assert round(post[sublayer][-1] / pre[sublayer][-1], 1) == ratio
    assert 0.4 < pre["ffn"][-1] / pre["ffn"][0] < 0.6


def unigram_loss(transition: np.ndarray) -> float:
    """Cross-entropy of predicting each token by its frequency alone: the entropy of the chain's
    stationary distribution (transition: (vocab_size, vocab_size), rows sum to 1)."""
    eigenvalues, vectors = np.linalg.eig(transition.T)
    pi = np.real(vectors[:, np.argmin(np.abs(eigenvalues - 1))])
    pi /= pi.sum()
    return float(-(pi * np.log(pi)).sum())


@pytest.mark.parametrize("mode", MODES)
def test_section_6_says_what_the_training_curves_show(mode):
    claim(SOLUTION, "Post-LN without warm-up gets stuck a little above the loss of a model that ignores "
                    "the context and predicts the token frequencies only (2.70 for this chain)")
    claim(SOLUTION, "mean loss over the last quarter: 2.93 for Post-LN without warm-up, 1.39 to 1.40 for "
                    "the other three")
    values = solution_run(ASSIGNMENT, mode)[1]
    frequencies, best = unigram_loss(np.array(values["transition"])), values["best_loss"]
    assert round(frequencies, 2) == 2.70
    last = {name: np.mean(losses[-len(losses) // 4:]) for name, losses in values["curves"].items()}
    stuck = last.pop("post-LN, no warm-up")
    assert frequencies < stuck < frequencies + 0.4
    assert all(best < loss < best + 0.4 for loss in last.values()), last
    if mode == "full":
        assert abs(stuck - 2.93) < 0.01 and all(1.38 < loss < 1.405 for loss in last.values()), last
