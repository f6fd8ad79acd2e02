"""The exercises of notebook 06 (GPT): references agree with course_lib, every registered
mistake is named, and learner code, right or with one realistic bug, goes through the same
path as a graded cell (``kernel.run_cases``, then ``judge``)."""

import numpy as np
import pytest
import torch

from autograder.exercises import get, gpt
from course_lib import decoding, generate
from course_lib import transformer as tf
from course_lib.attention import attention_forward, causal_mask, merge_heads, mha_forward, split_heads
from course_lib.layernorm import ffn_forward, layernorm_forward
from exercise_bank import TEST_KEY, assert_bug_is_named, learner_verdict, mistake_verdicts

KEYS = (TEST_KEY, b"another key")


def test_next_token_probs_reference_equals_the_library_sampler():
    ex = get("gpt.next_token_probs")
    for case in ex.graded_cases(TEST_KEY):
        want = generate.next_token_probs(torch.from_numpy(case["logits"]), case["temperature"],
                                         case["top_k"], case["top_p"])
        np.testing.assert_allclose(decoding.next_token_probs(**case), want.numpy(), atol=1e-12)


def test_stepping_without_a_mistake_equals_the_whole_forward_and_the_torch_cache():
    for case in get("gpt.kv_step").graded_cases(TEST_KEY):
        np.testing.assert_allclose(gpt.stepped(**case), tf.gpt_forward(**case), atol=1e-10)
    torch.manual_seed(0)
    model = tf.GPT(tf.GPTConfig(vocab_size=9, block_size=6, d_model=8, n_heads=2, n_layers=2)).double()
    idx = torch.randint(0, 9, (2, 6))
    cache = model.new_cache()
    torch_steps = torch.cat([model(idx[:, t:t + 1], cache=cache)[0] for t in range(6)], dim=1)
    np.testing.assert_allclose(gpt.stepped(idx.numpy(), tf.gpt_params(model), 2),
                               torch_steps.detach().numpy(), atol=1e-10)


def test_every_registered_mistake_loses_points_and_is_named():
    for exercise_id, name, verdict in mistake_verdicts(gpt.EXERCISES):
        assert not verdict.full_marks, (exercise_id, name)
        assert any(name in m for m in verdict.messages), (exercise_id, name, verdict.messages)


NAMESPACE = {"np": np, "causal_mask": causal_mask, "mha_forward": mha_forward,
             "layernorm_forward": layernorm_forward, "ffn_forward": ffn_forward,
             "split_heads": split_heads, "merge_heads": merge_heads,
             "attention_forward": attention_forward}

RIGHT = {
    "gpt.block": """
        def gpt_block(x, p, n_heads):
            mask = causal_mask(x.shape[1])
            h = layernorm_forward(x, *p["norm1"])[0]
            x = x + mha_forward(h, h, *p["attn"], n_heads, mask)[0]
            h = layernorm_forward(x, *p["norm2"])[0]
            return x + ffn_forward(h, *p["ffn"])[0]
        """,
    "gpt.forward": """
        def gpt_forward(idx, params, n_heads):
            T = idx.shape[1]
            x = params["W_E"][idx] + params["W_P"][:T]
            for p in params["blocks"]:
                x = gpt_block(x, p, n_heads)
            x = layernorm_forward(x, *params["norm_f"])[0]
            return x @ params["W_E"].T
        """,
    "gpt.next_token_probs": """
        def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
            z = logits / temperature
            z = z - z.max(axis=-1, keepdims=True)
            probs = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
            if top_k is not None:
                kth = np.sort(probs, axis=-1)[:, -top_k][:, None]
                probs = np.where(probs >= kth, probs, 0.0)
                probs = probs / probs.sum(axis=-1, keepdims=True)
            if top_p is not None:
                order = np.argsort(-probs, axis=-1)
                sorted_p = np.take_along_axis(probs, order, axis=-1)
                before = np.cumsum(sorted_p, axis=-1) - sorted_p
                drop = np.zeros(probs.shape, dtype=bool)
                np.put_along_axis(drop, order, before >= top_p, axis=-1)
                probs = np.where(drop, 0.0, probs)
                probs = probs / probs.sum(axis=-1, keepdims=True)
            return probs
        """,
    "gpt.kv_step": """
        def gpt_step(token, pos, cache, params, n_heads):
            x = params["W_E"][token][:, None, :] + params["W_P"][pos]     # (B, 1, d_model)
            for layer, p in enumerate(params["blocks"]):
                W_q, W_k, W_v, W_o = p["attn"]
                h = layernorm_forward(x, *p["norm1"])[0]
                q = split_heads(h @ W_q, n_heads)                          # (B, h, 1, d_k)
                k, v = split_heads(h @ W_k, n_heads), split_heads(h @ W_v, n_heads)
                if layer in cache:
                    k = np.concatenate([cache[layer][0], k], axis=2)
                    v = np.concatenate([cache[layer][1], v], axis=2)
                cache[layer] = (k, v)
                out = attention_forward(q, k, v)[0]                        # (B, h, 1, d_k)
                x = x + merge_heads(out) @ W_o
                x = x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]
            x = layernorm_forward(x, *params["norm_f"])[0]
            return (x @ params["W_E"].T)[:, 0]
        """,
}


def _verdict(exercise_id, source, key=TEST_KEY):
    # RIGHT["gpt.block"] first: gpt_forward calls it
    return learner_verdict(exercise_id, [RIGHT["gpt.block"], source], NAMESPACE, key)


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
@pytest.mark.parametrize("key", KEYS)
def test_right_learner_code_scores_full_marks(exercise_id, key):
    verdict = _verdict(exercise_id, RIGHT[exercise_id], key)
    assert verdict.full_marks, verdict.messages


def _mutant(exercise_id, old, new):
    source = RIGHT[exercise_id]
    assert old in source, (exercise_id, old)
    return exercise_id, source.replace(old, new)


CODE_MUTANTS = [  # realistic edits of the right code, and the mistake the feedback must name
    (*_mutant("gpt.block", "n_heads, mask)[0]", "n_heads)[0]"), "causal mask missing"),
    (*_mutant("gpt.block", "mask = causal_mask(x.shape[1])", "mask = ~causal_mask(x.shape[1])"),
     "causal mask inverted"),
    (*_mutant("gpt.block", 'layernorm_forward(x, *p["norm2"])', 'layernorm_forward(x, *p["norm1"])'),
     "the first layer norm used twice"),
    (*_mutant("gpt.forward", ' + params["W_P"][:T]', ""), "position embeddings forgotten"),
    (*_mutant("gpt.forward", 'params["W_P"][:T]', 'params["W_P"][1:T + 1]'),
     "positions counted from 1"),
    (*_mutant("gpt.forward", '            x = layernorm_forward(x, *params["norm_f"])[0]\n', ""),
     "final layer norm missing"),
    (*_mutant("gpt.next_token_probs", "z = logits / temperature", "z = logits * temperature"),
     None),  # not registered: the generic diagnosis must still say what differs
    (*_mutant("gpt.next_token_probs", "[:, -top_k]", "[:, -top_k + 1]"), "top-k keeping k-1 tokens"),
    (*_mutant("gpt.next_token_probs", "before >= top_p", "before + sorted_p > top_p"),
     "top-p that drops the token crossing the threshold"),
    (*_mutant("gpt.kv_step", 'params["W_P"][pos]', 'params["W_P"][0]'),
     "position index not advanced"),
    (*_mutant("gpt.kv_step", "attention_forward(q, k, v)[0]",
              "attention_forward(q, k, v, causal_mask(k.shape[2])[:1])[0]"),
     "causal mask applied to the cached keys of the single new query"),
    (*_mutant("gpt.kv_step", "if layer in cache:", "if 0 in cache:"), None),
]


@pytest.mark.parametrize("exercise_id,source,name", CODE_MUTANTS,
                         ids=[f"{m[0]}: {m[2]}" for m in CODE_MUTANTS])
def test_realistic_bugs_lose_points_and_are_named(exercise_id, source, name):
    assert_bug_is_named(_verdict(exercise_id, source), name)
