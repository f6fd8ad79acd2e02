"""The exercises of notebook 06's "GPT-3 by the numbers": references, mistakes, learner code.

The references of ``autograder.exercises.scaling`` are ``course_lib.scaling``; every
registered mistake is named; and learner code, right or with one realistic bug, goes through
the same path as a graded cell (``kernel.run_cases``, then ``judge``).
"""

import numpy as np
import pytest

from autograder.exercises import get, scaling as registry
from course_lib import scaling
from exercise_bank import TEST_KEY, learner_verdict, mistake_verdicts

KEYS = (TEST_KEY, b"another key", b"a third key")


# ------------------------------------------------------------------------ references
def _all_cases(ex):
    return ex.public_cases() + ex.graded_cases(TEST_KEY)


def test_references_are_the_librarys():
    for case in _all_cases(get("scaling.param_count")):
        sizes = {k: v for k, v in case.items() if k != "tied"}
        assert registry.param_count(**case) == scaling.param_count(**sizes, tied=case["tied"])
    for case in _all_cases(get("scaling.compute")):
        flops, days = registry.training_compute(**case)
        assert flops == 6 * case["n_params"] * case["n_tokens"] and days == flops / 8.64e19
    for case in _all_cases(get("scaling.memory")):
        m = scaling.training_memory_bytes(case["n_params"], case["bytes_per_param"], "adam",
                                          case["master_weights"])
        assert registry.training_memory(**case) == (m["weights"], m["gradients"], m["master"],
                                                    m["adam_m"] + m["adam_v"], m["total"])
    for case in _all_cases(get("scaling.kv_cache")):
        assert registry.kv_cache_bytes(**case) == scaling.kv_cache_bytes(**case)
    for case in _all_cases(get("scaling.train_time")):
        assert registry.training_days(**case) == scaling.training_days(
            case["flops"], case["n_devices"], case["peak_flops"], case["utilisation"])


def test_the_learner_meets_gpt3_in_the_public_cases():
    first = get("scaling.param_count").public_cases()[0]
    assert registry.param_count(**first) == pytest.approx(175e9, rel=0.003)
    assert registry.training_compute(**get("scaling.compute").public_cases()[0])[1] == \
        pytest.approx(3646, abs=1)
    assert registry.kv_cache_bytes(**get("scaling.kv_cache").public_cases()[0]) == 9 * 2 ** 30


def test_every_exercise_is_declared_as_the_contract_says():
    points = {ex.id: ex.points for ex in registry.EXERCISES}
    assert points == {"scaling.param_count": 3, "scaling.compute": 1, "scaling.memory": 2,
                      "scaling.kv_cache": 1, "scaling.train_time": 1}
    assert all(tuple(ex.forbidden) == ("course_lib.scaling",) for ex in registry.EXERCISES)
    assert sum(len(ex.mistakes) for ex in registry.EXERCISES) >= 8
    assert all(ex.output_names for ex in registry.EXERCISES)


# ------------------------------------------------------------------------ mistakes
@pytest.mark.parametrize("key", KEYS)
def test_every_mistake_loses_points_and_is_named(monkeypatch, key):
    import exercise_bank
    monkeypatch.setattr(exercise_bank, "TEST_KEY", key)
    for exercise_id, name, verdict in mistake_verdicts(registry.EXERCISES):
        assert verdict.points < verdict.max_points, (exercise_id, name)
        assert any(name in m for m in verdict.messages), (exercise_id, name, verdict.messages)


def test_no_mistake_hides_within_the_tolerance():
    """Each mistake differs from the reference by more than 1e-6 relative on some graded case,
    a thousand times the tolerance: small models make even the biases count."""
    for ex in registry.EXERCISES:
        cases = ex.graded_cases(TEST_KEY)
        for m in ex.mistakes:
            gaps = [max(abs(float(w) / float(r) - 1) for w, r in
                        zip(np.atleast_1d(m.wrong(**c)), np.atleast_1d(ex.reference(**c))) if r)
                    for c in cases]
            assert max(gaps) > 1e-6, (ex.id, m.name)


# ------------------------------------------------------------------------ learner code
RIGHT = {
    "scaling.param_count": """
        def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied):
            d = d_model
            attention = 4 * d * d + 4 * d
            mlp = d * d_ff + d_ff + d_ff * d + d
            norms = 2 * 2 * d
            total = n_layers * (attention + mlp + norms) + 2 * d
            total += vocab_size * d + n_ctx * d
            if not tied:
                total += vocab_size * d
            return total
        """,
    "scaling.compute": """
        def training_compute(n_params, n_tokens):
            flops = 6 * n_params * n_tokens
            return flops, flops / (1e15 * 24 * 3600)
        """,
    "scaling.memory": """
        def training_memory(n_params, bytes_per_param, master_weights):
            weights = n_params * bytes_per_param
            gradients = n_params * bytes_per_param
            master = 4 * n_params if master_weights else 0
            adam = 2 * 4 * n_params
            return weights, gradients, master, adam, weights + gradients + master + adam
        """,
    "scaling.kv_cache": """
        def kv_cache_bytes(n_layers, d_model, batch, context, bytes_per_value):
            return 2 * n_layers * d_model * batch * context * bytes_per_value
        """,
    "scaling.train_time": """
        def training_days(flops, n_devices, peak_flops, utilisation):
            seconds = flops / (n_devices * peak_flops * utilisation)
            return seconds / 86400
        """,
}


def _verdict(exercise_id, source, key=TEST_KEY):
    return learner_verdict(exercise_id, [source], {"np": np}, key)


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
@pytest.mark.parametrize("key", KEYS)
def test_right_learner_code_scores_full_marks(exercise_id, key):
    verdict = _verdict(exercise_id, RIGHT[exercise_id], key)
    assert verdict.full_marks, verdict.messages


def test_the_count_must_be_an_int_as_the_text_asks():
    """Float64 arithmetic gives the right count (it stays below 2**53) but not the int the text
    asks for: no points, and the message says why; int() of it scores full marks."""
    source = RIGHT["scaling.param_count"].replace("d = d_model", "d = float(d_model)")
    verdict = _verdict("scaling.param_count", source)
    assert verdict.points == 0 and "asks for an int" in verdict.messages[0], verdict.messages
    assert source.count("return total") == 1
    assert _verdict("scaling.param_count", source.replace("return total", "return int(total)")).full_marks


def _mutant(exercise_id, old, new):
    source = RIGHT[exercise_id]
    assert old in source, old
    return exercise_id, source.replace(old, new)


# (exercise, learner code with one bug, the name the feedback must contain)
WRONG = [
    (*_mutant("scaling.param_count", "attention = 4 * d * d + 4 * d", "attention = 4 * d * d"),
     "attention biases left out"),
    (*_mutant("scaling.param_count", "norms = 2 * 2 * d", "norms = 2 * d"),
     "one layer norm per block instead of two"),
    (*_mutant("scaling.param_count", "            if not tied:\n", "            if True:\n"),
     "output matrix counted although tied"),
    (*_mutant("scaling.param_count", " + n_ctx * d", ""), "position embeddings forgotten"),
    (*_mutant("scaling.param_count", "mlp = d * d_ff + d_ff + d_ff * d + d",
              "mlp = 8 * d * d + 4 * d + d"), "d_ff assumed to be 4 * d_model"),
    (*_mutant("scaling.param_count", "attention = 4 * d * d + 4 * d",
              "attention = 3 * n_heads * d * d + n_heads * d * d + 4 * d"),
     "each head given full d_model x d_model projections"),
    (*_mutant("scaling.compute", "flops = 6 *", "flops = 2 *"), "2 N D instead of 6 N D"),
    (*_mutant("scaling.compute", "flops / (1e15 * 24 * 3600)", "flops / 1e15"),
     "petaflop/s-day taken as 1e15 FLOPs"),
    (*_mutant("scaling.memory", "adam = 2 * 4 * n_params", "adam = 0"), "Adam states forgotten"),
    (*_mutant("scaling.memory", "adam = 2 * 4 * n_params", "adam = 2 * bytes_per_param * n_params"),
     "Adam's two moments kept in the working precision"),
    (*_mutant("scaling.memory", "adam = 2 * 4 * n_params", "adam = 4 * n_params"), "only one Adam state"),
    (*_mutant("scaling.memory", "master = 4 * n_params if master_weights else 0", "master = 0"),
     "fp32 master copy forgotten"),
    (*_mutant("scaling.kv_cache", "return 2 * n_layers", "return n_layers"),
     "keys only: the factor 2 for K and V missing"),
    (*_mutant("scaling.kv_cache", " * bytes_per_value", ""), "numbers counted, not bytes"),
    (*_mutant("scaling.train_time", "(n_devices * peak_flops * utilisation)",
              "(n_devices * peak_flops / utilisation)"), "utilisation applied the wrong way round"),
    (*_mutant("scaling.train_time", "seconds / 86400", "seconds / 3600"), "hours, not days"),
]


@pytest.mark.parametrize("exercise_id, source, name", WRONG, ids=[w[2] for w in WRONG])
def test_realistic_wrong_learner_code_loses_points_and_is_named(exercise_id, source, name):
    verdict = _verdict(exercise_id, source)
    assert verdict.points < verdict.max_points, f"{name} scores full marks"
    assert any(name in m for m in verdict.messages), (name, verdict.messages)
