"""Notebook 05 through the real grader: realistic code edits lose points and are named.

Full marks for the solution, zero for the release and the CI-mode run are checked for every
notebook in test_course_notebooks.py. Each group changes every exercise at most once, and no
edit touches a function that another exercise runs (bpe_encode calls the given merge_pair,
which no edit changes), so one grading run checks nine mistakes at once.
"""
import pytest

from helpers import SOLUTIONS, grade_mutant_bank

SOLUTION = SOLUTIONS / "05_encoder_decoder" / "encoder_decoder.ipynb"
TIE_RULE = "min(pair_count, key=lambda pair: (-pair_count[pair], pair))"
SHIFT = "return np.concatenate([[bos], target_ids]), np.concatenate([target_ids, [eos]])"
DEC_MASK = "dec_mask = (tgt_in != pad_id)[:, None, None, :] & causal"
SCALED = "W_E[ids] * np.sqrt(d_model) + P[:T]"
ENC_BODY = '''    attn = mha_forward(x, x, *p["self_attn"], n_heads, mask)[0]
    x = layernorm_forward(x + attn, *p["norm1"])[0]
    return layernorm_forward(x + ffn_forward(x, *p["ffn"])[0], *p["norm2"])[0]'''
ENC_PRE_LN = '''    h = layernorm_forward(x, *p["norm1"])[0]
    x = x + mha_forward(h, h, *p["self_attn"], n_heads, mask)[0]
    return x + ffn_forward(layernorm_forward(x, *p["norm2"])[0], *p["ffn"])[0]'''
GREEDY_STEP = """        seq.append(token)
        if token == eos:
            break
"""
ONCE = """        pairs = list(zip(word, word[1:]))
        if tuple(pair) in pairs:
            j = pairs.index(tuple(pair))
            word = word[:j] + [first_id + i] + word[j + 2:]"""

MUTANTS = {  # name: [(grade_id, old, new, exercise id, mistake name the feedback must give)]
    "one mistake in each of the nine exercises": [
        ("encdec_bpe_merges", TIE_RULE, "max(pair_count, key=lambda pair: (pair_count[pair], pair))",
         "encdec.bpe_merges", "BPE ties broken the other way (largest pair)"),
        ("encdec_bpe_encode", "for i, pair in enumerate(merges):",
         "for i, pair in reversed(list(enumerate(merges))):",
         "encdec.bpe_encode", "merges applied in the wrong order (reversed)"),
        ("encdec_shift_right", SHIFT,
         "return np.concatenate([target_ids, [eos]]), np.concatenate([target_ids, [eos]])",
         "encdec.shift_right", "target not shifted"),
        ("encdec_masks", DEC_MASK, "dec_mask = (tgt_in != pad_id)[:, None, None, :]",
         "encdec.masks", "causal mask missing in the decoder"),
        ("encdec_embed", SCALED, "W_E[ids] + P[:T]", "encdec.embed",
         "embedding not scaled by sqrt(d_model)"),
        ("encdec_encoder_block", 'n_heads, mask)[0]', "n_heads)[0]", "encdec.encoder_block",
         "encoder mask ignored"),
        ("encdec_decoder_block", "mha_forward(y, memory, ", "mha_forward(y, y, ",
         "encdec.decoder_block", "cross-attention keys/values taken from the decoder"),
        ("encdec_greedy", GREEDY_STEP, "        seq.append(token)\n", "encdec.greedy",
         "greedy that never stops at eos"),
        ("encdec_beam_search", "scores[:, None] + next_log_probs(beams)",
         "scores[:, None] + np.exp(next_log_probs(beams))", "encdec.beam_search",
         "beam scores summed as probabilities instead of log-probabilities"),
    ],
    "counts, start token, inverted padding, Pre-LN, no length normalisation": [
        ("encdec_bpe_merges", "pair_count.get(pair, 0) + n", "pair_count.get(pair, 0) + 1",
         "encdec.bpe_merges", "BPE counts ignored (each chunk counted once)"),
        ("encdec_bpe_encode", "        word = merge_pair(word, pair, first_id + i)", ONCE,
         "encdec.bpe_encode", "each merge applied only once per chunk"),
        ("encdec_shift_right", SHIFT,
         "return target_ids.copy(), np.concatenate([target_ids, [eos]])",
         "encdec.shift_right", "start token missing"),
        ("encdec_masks", "(src != pad_id)", "(src == pad_id)", None, None),
        ("encdec_masks", "(tgt_in != pad_id)", "(tgt_in == pad_id)", "encdec.masks",
         "padding mask inverted"),
        ("encdec_embed", SCALED, "W_E[ids] * d_model + P[:T]", "encdec.embed",
         "embedding scaled by d_model instead of sqrt(d_model)"),
        ("encdec_encoder_block", ENC_BODY, ENC_PRE_LN, "encdec.encoder_block",
         "encoder in Pre-LN order"),
        ("encdec_decoder_block", 'n_heads, self_mask)[0]', "n_heads)[0]",
         "encdec.decoder_block", "causal mask missing in the decoder"),
        ("encdec_greedy", "np.array(seq[1:], dtype=np.int64)", "np.array(seq, dtype=np.int64)",
         "encdec.greedy", "greedy that returns bos too"),
        ("encdec_beam_search", "[score / len(tokens) ** alpha for tokens, score in pool]",
         "[score for tokens, score in pool]", "encdec.beam_search", "no length normalisation"),
    ],
    "repeated pairs, end token, target padding, residual input, finished beams": [
        ("encdec_bpe_merges", "for pair in zip(word, word[1:]):", "for pair in set(zip(word, word[1:])):",
         "encdec.bpe_merges", "a repeated pair counted once per chunk"),
        ("encdec_shift_right", SHIFT, "return np.concatenate([[bos], target_ids]), target_ids.copy()",
         "encdec.shift_right", "end token missing"),
        ("encdec_masks", DEC_MASK, "dec_mask = causal[None, None]", "encdec.masks",
         "target padding ignored"),
        ("encdec_embed", SCALED, "W_E[ids] * np.sqrt(d_model)", "encdec.embed",
         "positions not added"),
        ("encdec_encoder_block", ENC_BODY,
         ENC_BODY.replace("    x = layernorm", "    h = layernorm").replace("ffn_forward(x,", "ffn_forward(h,"),
         "encdec.encoder_block", "second residual adds the block's input"),
        ("encdec_decoder_block", 'n_heads, cross_mask)[0]', "n_heads)[0]",
         "encdec.decoder_block", "cross mask ignored"),
        ("encdec_greedy", GREEDY_STEP,
         "        if token == eos:\n            break\n        seq.append(token)\n",
         "encdec.greedy", "eos left out of the result"),
        ("encdec_beam_search", "done = token == eos", "done = np.zeros(len(token), dtype=bool)",
         "encdec.beam_search", "finished beams extended"),
    ],
}


@pytest.mark.parametrize("edits", MUTANTS.values(), ids=MUTANTS.keys())
def test_mutants_lose_points_and_are_named(tmp_path, edits):
    grade_mutant_bank(SOLUTION, edits, tmp_path)
