"""Notebook 06 through the real grader: realistic code edits lose points and are named.

Full marks for the solution, zero for the release and the CI-mode run are checked for every
notebook in test_course_notebooks.py. One grading run checks one mistake in each of the nine
exercises; the block edit is in the one function the forward runs, so the forward's feedback
must point at it (``grade_mutant_bank`` checks that).
"""
import pytest

from helpers import SOLUTIONS, grade_mutant_bank

SOLUTION = SOLUTIONS / "06_gpt" / "gpt.ipynb"

MUTANTS = {  # name: [(grade_id, old, new, exercise id, mistake name the feedback must give)]
    "one mistake in each of the nine exercises": [
        ("gpt_block", "n_heads, mask)[0]", "n_heads)[0]", "gpt.block", "causal mask missing"),
        ("gpt_forward", ' + params["W_P"][:T]', "", "gpt.forward", None),
        ("next_token_probs", "before >= top_p", "before + sorted_p > top_p",
         "gpt.next_token_probs", "top-p that drops the token crossing the threshold"),
        ("gpt_step", 'params["W_P"][pos]', 'params["W_P"][0]', "gpt.kv_step",
         "position index not advanced"),
        ("scaling_param_count", "4 * d * d + 4 * d", "4 * d * d", "scaling.param_count",
         "attention biases left out"),
        ("scaling_compute", "6 * n_params", "2 * n_params", "scaling.compute", "2 N D instead of 6 N D"),
        ("scaling_memory", "(4 + 4) * n_params", "4 * n_params", "scaling.memory",
         "only one Adam state"),
        ("scaling_kv_cache", "2 * n_layers", "n_layers", "scaling.kv_cache", "keys only"),
        ("scaling_train_time", "n_devices * peak_flops * utilisation", "n_devices * peak_flops / utilisation",
         "scaling.train_time", "utilisation applied the wrong way round"),
    ],
    "KV cache, die and forward, second round": [
        ("gpt_step", "attention_forward(q, k, v)[0]",
         "attention_forward(q, k, v, causal_mask(k.shape[2])[:1])[0]", "gpt.kv_step",
         "causal mask applied to the cached keys of the single new query"),
        ("next_token_probs", "probs = softmax(logits / temperature, axis=-1)",
         "probs = softmax(logits, axis=-1) / temperature", "gpt.next_token_probs",
         "temperature applied after softmax"),
        ("gpt_forward", '    x = layernorm_forward(x, *params["norm_f"])[0]\n', "",
         "gpt.forward", "final layer norm missing"),
    ],
}


@pytest.mark.parametrize("edits", MUTANTS.values(), ids=MUTANTS.keys())
def test_mutants_lose_points_and_are_named(tmp_path, edits):
    grade_mutant_bank(SOLUTION, edits, tmp_path)
