"""Notebook 05: realistic code edits lose points and are named (through the real grader), and
what the text says the figures and printed numbers show holds in CI mode (and in full mode, on
request).

Full marks for the solution, zero for the release and the CI-mode run are checked for every
notebook in test_course_notebooks.py. Each group changes every exercise at most once, and no
edit touches a function that another exercise runs (bpe_encode calls the given merge_pair,
which no edit changes), so one grading run checks nine mistakes at once.
"""
import datetime
import itertools

import numpy as np
import pytest

from course_lib import tokenize as bpe
from course_lib import translation as tr
from helpers import MODES, SOLUTIONS, claim, grade_mutant_bank, solution_run

ASSIGNMENT = "05_encoder_decoder"
SOLUTION = SOLUTIONS / ASSIGNMENT / "encoder_decoder.ipynb"
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
    # one call of the model per beam, through the table model behind the kernel's counter
    # (calls.once_per_step): the grader runs the cases again alone, serving the model itself
    "the model called per beam, its counter bypassed": [
        ("encdec_beam_search", "    for _ in range(max_len):\n        cand = scores[:, None] + next_log_probs(beams)",
         "    model = ([c.cell_contents for c in next_log_probs.__closure__ or () if callable(c.cell_contents)]\n"
         "             or [next_log_probs])[0]\n"
         "    for _ in range(max_len):\n"
         "        cand = scores[:, None] + np.concatenate([model(beams[b:b + 1]) for b in range(len(beams))])",
         "encdec.beam_search", "one call per step"),
    ],
}


@pytest.mark.parametrize("edits", MUTANTS.values(), ids=MUTANTS.keys())
def test_mutants_lose_points_and_are_named(tmp_path, edits):
    grade_mutant_bank(SOLUTION, edits, tmp_path)


# --- what the text says the figures and printed numbers show (issue 24, item 7) ---

def test_section_1_says_what_bpe_learns_on_the_task():
    claim(SOLUTION, "the corpus \"aaab\" (3 times) and \"ab\" (once) has the pairs `(a, a)` 6 times and "
                    "`(a, b)` 4 times. The first merge makes `aa`; the chunks become `aa a b` and `a b`, whose "
                    "pairs are `(aa, a)` 3 times and `(a, b)` 4 times; the second merge makes `ab`.")
    claim(SOLUTION, "the sources and targets of the 50,000 training pairs together, which have only 136 "
                    "distinct chunks")
    claim(SOLUTION, "Trained on the task with a vocabulary of 400 ids (3 special, 256 bytes, 141 merges), it "
                    "makes every month name, whole or abbreviated, one token together with the space before "
                    "it, and it never merges two digits.")
    claim(SOLUTION, "both ways of learning give the same merges, and the incremental one is faster even on this "
                    "corpus of only 136 distinct chunks")
    claim(SOLUTION, "\"March\" is one token and so is \"Mon\", while every digit stays a token of its own "
                    "(\" 1\" holds the space before it); the German \"März\" and the sun symbol were never seen, "
                    "so they fall back to bytes (the sun alone takes three), and still every string comes back "
                    "intact.")
    a, b = bpe.BYTE_OFFSET + ord("a"), bpe.BYTE_OFFSET + ord("b")
    toy = {(a, a, a, b): 3, (a, b): 1}
    pairs = {pair: sum(n * list(zip(w, w[1:])).count(pair) for w, n in toy.items()) for pair in ((a, a), (a, b))}
    assert pairs == {(a, a): 6, (a, b): 4}
    assert bpe.learn_merges(toy, 2) == [(a, a), (a, b)]              # aa first, then ab (4 beats 3)

    splits = tr.make_splits()
    corpus = bpe.word_counts([text for pair in splits.train for text in pair])
    tokenizer = tr.train_tokenizer(splits.train, vocab_size=400)
    assert len(splits.train) == 50_000 and len(corpus) == 136
    assert bpe.FIRST_MERGE_ID + len(tokenizer.merges) == 400 and bpe.FIRST_MERGE_ID == 3 + 256
    assert bpe.learn_merges_naive(corpus, 141) == bpe.learn_merges(corpus, 141) == list(tokenizer.merges)
    months = {datetime.date(2000, month, 1).strftime(f) for month in range(1, 13) for f in ("%B", "%b")}
    assert all(len(tokenizer.encode(" " + name)) == 1 for name in months), months
    merged = [tokenizer.token_bytes(bpe.FIRST_MERGE_ID + i) for i in range(len(tokenizer.merges))]
    assert not any(sum(chr(byte).isdigit() for byte in token) > 1 for token in merged)
    assert tokenizer.tokens("the twenty-first of March, 1994")[6:] == [" March", ",", " 1", "9", "9", "4"]
    assert tokenizer.tokens("Mon 21 Mar 94")[0] == "Mon"
    unseen = "21. März 1994 ☀"
    assert tokenizer.tokens("☀") == tokenizer.tokens(unseen)[-3:] and len(tokenizer.encode("☀")) == 3
    assert all(i < bpe.FIRST_MERGE_ID for c in "ä☀" for i in tokenizer.encode(c))   # bytes only
    assert all(tokenizer.decode(tokenizer.encode(s)) == s
               for s in ("the twenty-first of March, 1994", "Mon 21 Mar 94", "1994-03-21", unseen))

@pytest.mark.parametrize("mode", MODES)
def test_section_2_says_how_long_sources_and_targets_are(mode):
    claim(SOLUTION, "every target has exactly 10 tokens (BPE merges no two digits, and `-` stays "
                    "alone), while sources spread from 5 to 14 tokens")
    lengths = solution_run(ASSIGNMENT, mode)[1]["length_range"]
    assert lengths == {"source": [5, 14], "target": [10, 10]}


@pytest.mark.parametrize("mode", MODES)
def test_section_7_says_what_the_training_curves_show(mode):
    claim(SOLUTION, "the loss falls fastest during the warm-up (the first 400 steps), while the learning "
                    "rate grows; the validation token accuracy climbs above 0.9 within the first few "
                    "hundred steps and then creeps towards 1.")
    history = solution_run(ASSIGNMENT, mode)[1]["history"]
    step, loss, acc = (np.array(history[key]) for key in ("step", "train_loss", "val_token_acc"))
    drops = -np.diff(loss) / np.diff(step)                        # loss per step between records
    assert step[0] <= 400 and np.argmax(drops) == 0, drops        # CI: 100, 200, ...; full: 250, 500, ...
    assert np.all(np.diff(history["lr"])[step[1:] <= 400] > 0)
    assert step[np.argmax(acc > 0.9)] <= 500 and acc.max() > 0.9   # CI: 0.91 at step 200
    assert acc[-1] > 0.95 and acc[-1] >= acc[np.argmax(acc > 0.9)]


@pytest.mark.parametrize("mode", MODES)
def test_section_9_says_which_forms_are_hard(mode):
    claim(SOLUTION, "after full training every form is near 1 (measured in full mode: 1.0 for all 14 in one "
                    "run, 0.94 to 1.0 in another, on a busy machine that stopped training at 5 minutes after "
                    "2,661 of the 6,000 steps")
    claim(SOLUTION, "After 300 steps the forms with a two-digit year, such as `21.03.94` and `21 Mar '94`, "
                    "score below the average form, and `21.03.94`, in figures only, is among the hardest")
    claim(SOLUTION, "Forms that write the day with a suffix, as in `21st of March 1994`, are among the easiest.")
    values = solution_run(ASSIGNMENT, mode)[1]
    forms = np.array(values["forms"])

    def by_form(hits):                                            # exact match of each source form
        return np.array([np.mean(np.array(hits)[forms == f]) for f in range(len(tr.FORMATS))])

    # which forms are hardest after 300 steps moves with the training's rounding (a change of
    # layer norm's backward from torch ops to C++ moved `21 Mar '94` from 3rd to 6th hardest),
    # so the text claims what held on both: below the average, and the figures-only form near
    # the bottom (it was the hardest in both, at 0.28)
    weak_by_form = by_form(values["weak_right"])
    weak = np.argsort(weak_by_form)                               # hardest first
    two_digit_year = [f for f, form in enumerate(tr.FORMATS) if "{yy}" in form]
    suffix = [f for f, form in enumerate(tr.FORMATS) if "{th}" in form]
    assert all(weak_by_form[f] < weak_by_form.mean() for f in two_digit_year), weak_by_form
    assert tr.FORMATS.index("{dd}.{mm}.{yy}") in weak[:2] and set(suffix) <= set(weak[-4:]), weak
    if mode == "full":   # training stops at 5 minutes: how far it gets depends on the machine
        assert np.all(by_form(values["right"]["greedy"]) >= 0.9)


@pytest.mark.parametrize("mode", MODES)
def test_section_10_says_how_well_the_best_head_matches_the_alignment(mode):
    claim(SOLUTION, "A head that spread its weight evenly over the source would score about 0.2")
    claim(SOLUTION, "the best head puts most of its weight on the hand-aligned tokens, four to five times an "
                    "even spread (measured in two full-mode runs: 0.97 and 0.96, against 0.21 evenly spread; "
                    "which head it is changes from run to run)")
    values = solution_run(ASSIGNMENT, mode)[1]
    share, sources = np.array(values["share"]), values["sources"]  # (n_layers, n_heads); t: [source positions]
    even = np.mean([len(js) for js in sources.values()]) / len(values["src_names"])
    assert round(even, 2) == 0.21
    assert share.max() > 0.5 and 3.5 < share.max() / even < 5       # CI: 0.85, 4.1 times
    if mode == "full":        # measured 0.97 (layer 1, head 3) and 0.96 (layer 2, head 1): 4.6 times
        assert share.max() > 0.9


def test_section_8_says_what_greedy_and_beam_search_choose_in_the_tree():
    claim(SOLUTION, "greedy takes `A` (0.5 beats 0.4) and then `C`, the best of three mediocre "
                    "continuations: 0.5 × 0.4 = 0.20. Beam search also keeps `B` alive after the first step, "
                    "and `B` is followed by `C` with probability 0.9: 0.4 × 0.9 = 0.36, the likeliest output "
                    "of the tree.")
    values = solution_run(ASSIGNMENT)[1]
    prob, names = np.array(values["prob"]), values["table_names"]   # (max_len + 1, V, V): step, last, next
    A, B, C, end = (names.index(n) for n in ("A", "B", "C", "</s>"))

    def p(tokens):                                                   # probability of a whole output
        return np.prod([prob[t, last, tok] for t, (last, tok) in enumerate(zip([1] + tokens, tokens))])

    assert prob[0, 1, A] == 0.5 and prob[0, 1, B] == 0.4
    assert values["greedy_tokens"] == [A, C, end] and np.isclose(p([A, C, end]), 0.20)
    after_a = prob[1, A][prob[1, A] > 0]
    assert len(after_a) == 3 and after_a.max() == prob[1, A, C] == 0.4
    assert values["beam_tokens"] == [B, C, end] and prob[1, B, C] == 0.9 and np.isclose(p([B, C, end]), 0.36)
    outputs = [list(o[:o.index(end) + 1]) for o in itertools.product(range(len(names)), repeat=3) if end in o]
    assert max(outputs, key=p) == [B, C, end]
