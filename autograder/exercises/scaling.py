"""Exercises of notebook 06, "GPT-3 by the numbers" [trusted; also the check cell]

Parameters, compute, memory, time.

Every input is a plain Python number (sizes are ints, budgets floats) and every output a
scalar. The cases put GPT-3's own sizes among the public ones, so the learner sees 175
billion come out, and add toy models on which each named mistake changes the answer by far
more than the tolerance (leaving out the biases of GPT-3 175B changes its count by only 3e-6).
The references are ``course_lib.scaling``, which the learner may not call.
"""
from __future__ import annotations

from autograder.judge.exercise import Exercise, Mistake, switchable
from autograder.judge.features import shape_features
from course_lib import scaling

FORBIDDEN = ("course_lib.scaling",)
RTOL, ATOL = 1e-9, 0.0  # float rounding passes; no mistake below is within 1e-9 of the answer


# ============================================================================ parameters
def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied):
    """Parameters of a GPT with biases everywhere and learned positions (course_lib.scaling)."""
    return scaling.param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied=tied)


def _count_cases(rng, hidden):
    gpt3 = {k: v for k, v in scaling.GPT3_175B.items() if k != "d_head"}
    if not hidden:
        return [dict(gpt3, tied=True),
                dict(n_layers=12, d_model=768, n_heads=12, vocab_size=50257, n_ctx=2048,
                     d_ff=3072, tied=True),  # GPT-3 Small
                dict(n_layers=2, d_model=8, n_heads=2, vocab_size=11, n_ctx=16, d_ff=32, tied=True),
                dict(n_layers=1, d_model=6, n_heads=3, vocab_size=7, n_ctx=5, d_ff=24, tied=False),
                dict(n_layers=3, d_model=10, n_heads=2, vocab_size=13, n_ctx=9, d_ff=16, tied=True)]
    cases = []
    for _ in range(5):
        n_heads = int(rng.integers(2, 5))
        d_model = n_heads * int(rng.integers(2, 6))
        d_ff = 4 * d_model if rng.random() < 0.5 else int(rng.integers(d_model, 6 * d_model))
        cases.append(dict(n_layers=int(rng.integers(1, 5)), d_model=d_model, n_heads=n_heads,
                          vocab_size=int(rng.integers(5, 60)), n_ctx=int(rng.integers(4, 33)),
                          d_ff=d_ff, tied=bool(rng.random() < 0.5)))
    cases[0]["tied"], cases[1]["tied"] = True, False  # both kinds, whatever the draw
    row = scaling.TABLE_2_1[int(rng.integers(len(scaling.TABLE_2_1) - 1))]
    cases.append(dict(n_layers=row.n_layers, d_model=row.d_model, n_heads=row.n_heads,
                      vocab_size=scaling.VOCAB_SIZE, n_ctx=scaling.N_CTX, d_ff=4 * row.d_model,
                      tied=True))
    return cases


# terms that a mistake adds to the count (negative: something left out), by the switch of
# ``_counted`` that adds them
_TERMS = {
    "mlp_biases_out": lambda n_layers, d_model, d_ff, **_: -n_layers * (d_ff + d_model),
    "one_norm_per_block": lambda n_layers, d_model, **_: -2 * d_model * n_layers,
    "final_norm_out": lambda d_model, **_: -2 * d_model,
    "w_o_out": lambda n_layers, d_model, **_: -n_layers * (d_model ** 2 + d_model),
    "full_heads": lambda n_layers, d_model, n_heads, **_: 4 * (n_heads - 1) * d_model ** 2 * n_layers,
}


@switchable
def _counted(**switches):
    """param_count with mistakes switched on: course_lib.scaling's own switches (biases=False,
    tied, d_ff=None, ...) and the terms of ``_TERMS`` (name=True), so that two listed mistakes
    can be made at once (``verdict.identify_pair``)."""
    terms = [_TERMS[k] for k, on in switches.items() if k in _TERMS and on]
    change = {k: v for k, v in switches.items() if k not in _TERMS}

    def wrong(**case):  # n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied
        return scaling.param_count(**{**case, **change}) + sum(term(**case) for term in terms)
    return wrong


COUNT_MISTAKES = (
    Mistake(name="biases left out",
            hint="every linear layer has a bias: b_q, b_k, b_v (n_heads * d_head each), b_o (d_model), "
                 "b_1 (d_ff) and b_2 (d_model), in every block.", wrong=_counted(biases=False)),
    Mistake(name="MLP biases left out",
            hint="the MLP's two linear layers have biases too: b_1 (d_ff) and b_2 (d_model) per block.",
            wrong=_counted(mlp_biases_out=True)),
    Mistake(name="attention biases left out",
            hint="W_q, W_k, W_v and W_o each have a bias too: 4 * d_model per block.",
            wrong=_counted(attention_biases=False)),
    Mistake(name="layer-norm parameters left out",
            hint="each layer norm has a gain gamma and a shift beta of d_model numbers each: two layer "
                 "norms per block and a final one.", wrong=_counted(layernorm=False)),
    Mistake(name="one layer norm per block instead of two",
            hint="a Pre-LN block normalises before attention and again before the MLP: 2 * 2 * d_model "
                 "per block.",
            wrong=_counted(one_norm_per_block=True)),
    Mistake(name="final layer norm forgotten",
            hint="after the last block a final layer norm (2 * d_model) comes before the output layer.",
            wrong=_counted(final_norm_out=True)),
    Mistake(name="output matrix counted although tied",
            hint="with tied=True the output layer *is* the token embedding W_E: count it once.",
            wrong=_counted(tied=False)),
    Mistake(name="output matrix forgotten when untied",
            hint="with tied=False the output layer has its own vocab_size x d_model matrix (no bias).",
            wrong=_counted(tied=True)),
    Mistake(name="position embeddings forgotten",
            hint="a GPT learns one vector per position: n_ctx x d_model more.",
            wrong=_counted(learned_positions=False)),
    Mistake(name="d_ff assumed to be 4 * d_model",
            hint="use the d_ff you are given; 4 * d_model is only GPT's usual choice.",
            wrong=_counted(d_ff=None)),
    Mistake(name="attention output projection W_o forgotten",
            hint="after the heads are concatenated, W_o (d_model x d_model, with a bias) maps them "
                 "back: 4 weight matrices per attention layer, not 3.",
            wrong=_counted(w_o_out=True)),
    Mistake(name="each head given full d_model x d_model projections",
            hint="the heads split d_model: head j has d_head = d_model / n_heads columns of W_q, W_k "
                 "and W_v, so the number of heads does not change the count.",
            wrong=_counted(full_heads=True)),
)


def _switched(host, switch, others, where=""):
    """Mutants that put another name where one of course_lib's switches is read (in the statement
    ``where``, when the host reads it in more than one): the switches (biases, attention_biases,
    layernorm, learned_positions) are True in every count of this exercise, and so is every name
    put in their place (a positive size or count, or a switch)."""
    suffix = f" in `{where}`" if where else ""
    return {f"{host}: {switch} -> {other}{suffix}":
            f"`{switch}` is always True here and `{other}` is true too (a positive number, or on)"
            for other in others.split()}


def _each_use(change, uses):
    """The ids of one change made at each of its places: ``uses`` pairs a statement with how
    many times the host reads the name there (``#2`` ... inside one statement)."""
    return [f"{change} in `{where}`" + (f" #{k}" if k > 1 else "")
            for where, times in uses for k in range(1, times + 1)]


_USES_OF_D = (("attention = …", 2), ("mlp = …", 2), ("return …", 5))  # param_breakdown's d

# Mutants of the reference (course_lib.scaling.param_count and param_breakdown) that no case
# can tell apart (``autograder.exercises.adequacy``): the exercise fixes every switch of course_lib's
# count (biases, layer norms, learned positions all counted) and has no d_head.
COUNT_EQUIVALENT = {
    "param_count: int(sum(param_breakdown(n_layers, d_model, n_heads, vocab_si -> "
    "sum(param_breakdown(n_layers, d_model, n_heads, vocab_size, ":
        "every part is a Python int (the sizes are ints), so their sum is an int already",
    "param_breakdown: a line that updates `d_ff` is missing":
        "the line only turns d_ff = None into 4 * d_model; the exercise always passes d_ff",
    "param_breakdown: d -> d_model in `a = …`": "d is d_model (d = d_model)",
    "param_breakdown: a -> d in `attention = …`": "the attention width a is d_model: the exercise passes no d_head",
    "param_breakdown: a -> d_model in `attention = …`":
        "the attention width a is d_model: the exercise passes no d_head",
    # the later uses of d (in attention, mlp and the returned parts)
    **{m: "d is d_model (d = d_model)" for m in _each_use("param_breakdown: d -> d_model", _USES_OF_D)},
    **{m: "a = d: the exercise passes no d_head, so the attention width a is d_model"
       for m in _each_use("param_breakdown: d -> a", _USES_OF_D)},
    "param_breakdown: a -> d in `attention = …` #2":
        "the attention width a is d_model: the exercise passes no d_head",
    "param_breakdown: a -> d_model in `attention = …` #2":
        "the attention width a is d_model: the exercise passes no d_head",
    **_switched("param_count", "biases",
                "d_ff d_model layernorm learned_positions n_ctx n_heads n_layers vocab_size"),
    **_switched("param_count", "layernorm",
                "biases d_ff d_model learned_positions n_ctx n_heads n_layers vocab_size"),
    **_switched("param_count", "learned_positions",
                "biases d_ff d_model layernorm n_ctx n_heads n_layers vocab_size"),
    **_switched("param_breakdown", "biases", "a d d_ff d_model layernorm learned_positions "
                                             "n_ctx n_heads n_layers vocab_size", "attention_biases = …"),
    **_switched("param_breakdown", "attention_biases", "a biases d d_ff d_model layernorm "
                "learned_positions n_ctx n_heads n_layers vocab_size", "attention = …"),
    **_switched("param_breakdown", "biases", "a attention attention_biases d d_ff d_model "
                "layernorm learned_positions n_ctx n_heads n_layers vocab_size", "mlp = …"),
    **_switched("param_breakdown", "learned_positions", "a attention attention_biases biases d "
                "d_ff d_model layernorm mlp n_ctx n_heads n_layers vocab_size"),
    **_switched("param_breakdown", "layernorm", "a attention attention_biases biases d d_ff "
                "d_model learned_positions mlp n_ctx n_heads n_layers vocab_size"),
}

COUNT_FEATURES = shape_features(**{
    "GPT-3 sizes": lambda c: c["vocab_size"] == scaling.VOCAB_SIZE,
    "an untied output layer": lambda c: not c["tied"],
    "d_ff other than 4 * d_model": lambda c: c["d_ff"] != 4 * c["d_model"],
    "a single block": lambda c: c["n_layers"] == 1})

PARAM_COUNT = Exercise(
    id="scaling.param_count",
    search_sites=4500,  # benchmarks/repair_search.py: about 3 s of edits
    function="param_count",
    signature="param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, tied) -> int",
    cases=_count_cases,
    reference=param_count,
    points=3,
    rtol=RTOL,
    atol=ATOL,
    output_names=("n_params",),
    forbidden=FORBIDDEN,
    features=COUNT_FEATURES,
    equivalent=COUNT_EQUIVALENT,
    int_scalars=True,  # "Return the number of parameters as an `int`"
    mistakes=COUNT_MISTAKES,
)


# ============================================================================ compute
def training_compute(n_params, n_tokens):
    """(training FLOPs = 6 N D, the same in petaflop/s-days)."""
    flops = scaling.training_flops(n_params, n_tokens)
    return flops, scaling.pfs_days(flops)


def _compute_cases(rng, hidden):
    if not hidden:
        return [dict(n_params=175e9, n_tokens=300e9), dict(n_params=2.7e9, n_tokens=300e9),
                dict(n_params=175e9, n_tokens=500e9), dict(n_params=1.2e6, n_tokens=3e7)]
    return [dict(n_params=float(10 ** rng.uniform(5, 12)),
                 n_tokens=float(10 ** rng.uniform(7, 12.5))) for _ in range(4)]


def _compute_with(per_token, pfs_day=scaling.PFS_DAY):
    def wrong(n_params, n_tokens):
        flops = per_token * n_params * n_tokens
        return flops, flops / pfs_day
    return wrong


COMPUTE_EQUIVALENT = {
    "training_compute: scaling.training_flops(n_params, n_tokens) -> "
    "scaling.training_flops(n_tokens, n_params)":
        "6 N D = 6 D N: the two orders differ by a rounding, far below rtol 1e-9",
}

COMPUTE_MISTAKES = (
    Mistake(name="2 N D instead of 6 N D (the forward pass only)",
            hint="the forward pass costs 2 FLOPs per parameter per token and the backward pass twice "
                 "that (one product for the input's gradient, one for the weight's): 6 N D.",
            wrong=_compute_with(2)),
    Mistake(name="4 N D: the backward pass costed like the forward",
            hint="the backward pass computes two products per weight (dL/dx and dL/dW), 4 FLOPs per "
                 "parameter per token, so the total is 2 + 4 = 6 N D.", wrong=_compute_with(4)),
    Mistake(name="petaflop/s-day taken as 1e15 FLOPs",
            hint="a petaflop/s-day is 1e15 FLOPs per second for a whole day: 1e15 x 86400 = 8.64e19 "
                 "FLOPs.", wrong=_compute_with(6, 1e15)),
    Mistake(name="a day counted as 24 (hours), not 86400 seconds",
            hint="petaflop/s is per second, so a day is 24 x 3600 = 86400 of them: 8.64e19 FLOPs.",
            wrong=_compute_with(6, 1e15 * 24)),
)

COMPUTE = Exercise(
    id="scaling.compute",
    function="training_compute",
    signature="training_compute(n_params, n_tokens) -> (flops, pfs_days)",
    cases=_compute_cases,
    reference=training_compute,
    points=1,
    rtol=RTOL,
    atol=ATOL,
    output_names=("flops", "pfs_days"),
    forbidden=FORBIDDEN,
    equivalent=COMPUTE_EQUIVALENT,
    mistakes=COMPUTE_MISTAKES,
)


# ============================================================================ memory
def training_memory(n_params, bytes_per_param, master_weights):
    """(weights, gradients, fp32 master copy, Adam's two moments, total) in bytes."""
    m = scaling.training_memory_bytes(n_params, bytes_per_param, "adam", master_weights)
    return m["weights"], m["gradients"], m["master"], m["adam_m"] + m["adam_v"], m["total"]


def _memory_cases(rng, hidden):
    if not hidden:
        return [dict(n_params=175e9, bytes_per_param=2, master_weights=True),
                dict(n_params=175e9, bytes_per_param=4, master_weights=False),
                dict(n_params=125_000_000, bytes_per_param=2, master_weights=True),
                dict(n_params=7_000_000, bytes_per_param=2, master_weights=False)]
    # bytes_per_param 2 and 4 both with and without the master copy: with 2 bytes alone, a
    # master copy of 4 N equals weights + gradients (2 N + 2 N), and a total without it looks
    # like one with bytes_per_param = 0
    kinds = [(2, True), (4, False), (2, False), (4, True)]
    return [dict(n_params=int(10 ** rng.uniform(5, 11)), bytes_per_param=b, master_weights=m)
            for b, m in kinds]


def _memory_with(adam_states=2, master=None, master_bytes=lambda b: 4, gradients=True,
                 adam_bytes=lambda b: 4):
    """The memory budget with one convention changed: the number of Adam states and their
    bytes per parameter, whether the master copy is kept (None: as master_weights says) and
    its bytes per parameter, whether gradients are counted."""
    def wrong(n_params, bytes_per_param, master_weights):
        weights = n_params * bytes_per_param
        grads = weights if gradients else 0
        keep = master_weights if master is None else master
        copy = n_params * master_bytes(bytes_per_param) if keep else 0
        adam = n_params * adam_bytes(bytes_per_param) * adam_states
        return weights, grads, copy, adam, weights + grads + copy + adam
    return wrong


MEMORY_MISTAKES = (
    Mistake(name="Adam states forgotten",
            hint="Adam keeps two numbers per parameter, its first and second moments, in fp32: 8 bytes per "
                 "parameter on top of the weights and gradients.", wrong=_memory_with(adam_states=0)),
    Mistake(name="only one Adam state (4 bytes per parameter)",
            hint="Adam keeps a running mean of the gradients *and* a running mean of their squares, "
                 "each in fp32: 4 + 4 bytes per parameter.", wrong=_memory_with(adam_states=1)),
    Mistake(name="Adam's two moments kept in the working precision",
            hint="the optimizer's states stay in fp32 whatever the precision of the weights: "
                 "4 + 4 bytes per parameter, not 2 * bytes_per_param.",
            wrong=_memory_with(adam_bytes=lambda b: b)),
    Mistake(name="fp32 master copy forgotten",
            hint="in mixed precision (master_weights=True) the optimizer updates an fp32 copy of the "
                 "weights: 4 more bytes per parameter.", wrong=_memory_with(master=False)),
    Mistake(name="master copy kept in the working precision",
            hint="the master copy exists to hold the small updates that fp16/bf16 would round away: "
                 "it is fp32, 4 bytes per parameter.", wrong=_memory_with(master_bytes=lambda b: b)),
    Mistake(name="master copy counted without mixed precision",
            hint="with master_weights=False the weights themselves are what the optimizer updates: "
                 "there is no separate copy.", wrong=_memory_with(master=True)),
    Mistake(name="gradients forgotten",
            hint="backpropagation stores one gradient per parameter, in the working precision.",
            wrong=_memory_with(gradients=False)),
)

MEMORY_EQUIVALENT = {
    "training_memory_bytes: n_states >= 1 -> n_states > 1":
        "n_states is 2: the exercise is always Adam (course_lib's optimizer='adam')",
    "training_memory_bytes: 2 -> 0.5":
        "in `n_states >= 2`, n_states is always 2 (Adam): n_states >= 0.5 holds as well",
    "training_memory_bytes: 2 -> 1":
        "in `n_states >= 2`, n_states is always 2 (Adam): n_states >= 1 holds as well",
}

MEMORY_FEATURES = shape_features(**{
    "fp32 weights (4 bytes)": lambda c: c["bytes_per_param"] == 4,
    "no master copy": lambda c: not c["master_weights"]})

MEMORY = Exercise(
    id="scaling.memory",
    function="training_memory",
    signature="training_memory(n_params, bytes_per_param, master_weights) -> "
              "(weights, gradients, master, adam, total)",
    cases=_memory_cases,
    reference=training_memory,
    points=2,
    rtol=RTOL,
    atol=ATOL,
    output_names=("weights", "gradients", "master", "adam", "total"),
    forbidden=FORBIDDEN,
    features=MEMORY_FEATURES,
    equivalent=MEMORY_EQUIVALENT,
    mistakes=MEMORY_MISTAKES,
)


# ============================================================================ KV cache
def kv_cache_bytes(n_layers, d_model, batch, context, bytes_per_value):
    return scaling.kv_cache_bytes(n_layers, d_model, batch, context, bytes_per_value)


def _kv_cases(rng, hidden):
    if not hidden:
        return [dict(n_layers=96, d_model=12288, batch=1, context=2048, bytes_per_value=2),
                dict(n_layers=96, d_model=12288, batch=8, context=2048, bytes_per_value=2),
                dict(n_layers=4, d_model=128, batch=12, context=64, bytes_per_value=4),
                dict(n_layers=3, d_model=16, batch=5, context=10, bytes_per_value=1)]
    return [dict(n_layers=int(rng.integers(2, 50)), d_model=64 * int(rng.integers(1, 100)),
                 batch=int(b), context=int(rng.integers(16, 4097)), bytes_per_value=int(v))
            for b, v in [(1, 2), (rng.integers(3, 64), 2), (rng.integers(3, 64), 4),
                         (rng.integers(3, 64), 1)]]


def _times(reference, factor):
    """A mistake off by a factor of the case's own numbers: reference(**case) * factor(**case)."""
    def wrong(**case):
        return reference(**case) * factor(**case)
    return wrong


def _kv_times(factor):
    return _times(kv_cache_bytes, factor)


KV_MISTAKES = (
    Mistake(name="keys only: the factor 2 for K and V missing",
            hint="each position keeps a key *and* a value vector in every layer: 2 x n_layers x "
                 "d_model numbers.", wrong=_kv_times(lambda **_: 0.5)),
    Mistake(name="one layer only",
            hint="every layer has its own keys and values: multiply by n_layers.",
            wrong=_kv_times(lambda n_layers, **_: 1 / n_layers)),
    Mistake(name="batch left out",
            hint="each of the batch sequences has its own cache: multiply by batch.",
            wrong=_kv_times(lambda batch, **_: 1 / batch)),
    Mistake(name="numbers counted, not bytes",
            hint="multiply the number of cached values by bytes_per_value (2 for fp16/bf16).",
            wrong=_kv_times(lambda bytes_per_value, **_: 1 / bytes_per_value)),
)

_KV_CALL = "kv_cache_bytes: scaling.kv_cache_bytes(n_layers, d_model, batch, context, by -> "
_KV_PRODUCT = "the bytes are a product of ints: the factors in any order give the same number"
KV_EQUIVALENT = {
    _KV_CALL + "scaling.kv_cache_bytes(d_model, n_layers, batch, context, by": _KV_PRODUCT,
    _KV_CALL + "scaling.kv_cache_bytes(n_layers, batch, d_model, context, by": _KV_PRODUCT,
    _KV_CALL + "scaling.kv_cache_bytes(n_layers, d_model, context, batch, by": _KV_PRODUCT,
    _KV_CALL + "scaling.kv_cache_bytes(n_layers, d_model, batch, bytes_per_v": _KV_PRODUCT,
}

KV_FEATURES = shape_features(**{
    "a batch of one sequence": lambda c: c["batch"] == 1,
    "1-byte values": lambda c: c["bytes_per_value"] == 1,
    "4-byte values": lambda c: c["bytes_per_value"] == 4})

KV_CACHE = Exercise(
    id="scaling.kv_cache",
    function="kv_cache_bytes",
    signature="kv_cache_bytes(n_layers, d_model, batch, context, bytes_per_value) -> bytes",
    cases=_kv_cases,
    reference=kv_cache_bytes,
    points=1,
    rtol=RTOL,
    atol=ATOL,
    output_names=("bytes",),
    forbidden=FORBIDDEN,
    features=KV_FEATURES,
    equivalent=KV_EQUIVALENT,
    mistakes=KV_MISTAKES,
)


# ============================================================================ training time
def training_days(flops, n_devices, peak_flops, utilisation):
    return scaling.training_days(flops, n_devices, peak_flops, utilisation)


def _time_cases(rng, hidden):
    if not hidden:
        return [dict(flops=3.14e23, n_devices=1024, peak_flops=312e12, utilisation=0.3),
                dict(flops=4.86e21, n_devices=64, peak_flops=125e12, utilisation=0.4),
                dict(flops=1e18, n_devices=1, peak_flops=1e14, utilisation=0.5)]
    return [dict(flops=float(10 ** rng.uniform(17, 24)), n_devices=int(n),
                 peak_flops=float(rng.choice([125e12, 312e12, 989e12])),
                 utilisation=float(rng.uniform(0.2, 0.6)))
            for n in (1, rng.integers(8, 4096), rng.integers(8, 4096))]


def _days_times(factor):
    return _times(training_days, factor)


TIME_MISTAKES = (
    Mistake(name="utilisation applied the wrong way round",
            hint="a device achieves only utilisation x peak FLOP/s, so the run takes *longer* than at "
                 "peak: divide by n_devices x peak_flops x utilisation.",
            wrong=_days_times(lambda utilisation, **_: utilisation ** 2)),
    Mistake(name="utilisation ignored",
            hint="no device runs at its peak: the achieved rate is utilisation x peak_flops.",
            wrong=_days_times(lambda utilisation, **_: utilisation)),
    Mistake(name="devices left out",
            hint="the work is shared by n_devices accelerators: divide by n_devices as well.",
            wrong=_days_times(lambda n_devices, **_: n_devices)),
    Mistake(name="seconds, not days", hint="FLOPs / (FLOP/s) is in seconds; a day has 86400 of them.",
            wrong=_days_times(lambda **_: 86400)),
    Mistake(name="hours, not days", hint="divide the seconds by 86400 = 24 x 3600 to get days.",
            wrong=_days_times(lambda **_: 24)),
)

_DAYS_CALL = ("training_days: scaling.training_days(flops, n_devices, peak_flops, utilisat -> "
              "scaling.training_days(flops, ")
_DAYS_PRODUCT = ("flops / (n_devices x peak_flops x utilisation): the three factors in any order "
                 "differ by a rounding, far below rtol 1e-9")
TIME_EQUIVALENT = {
    _DAYS_CALL + "peak_flops, n_devices, utilisat": _DAYS_PRODUCT,
    _DAYS_CALL + "n_devices, utilisation, peak_fl": _DAYS_PRODUCT,
}

TIME_FEATURES = shape_features(**{"a single device": lambda c: c["n_devices"] == 1})

TRAIN_TIME = Exercise(
    id="scaling.train_time",
    function="training_days",
    signature="training_days(flops, n_devices, peak_flops, utilisation) -> days",
    cases=_time_cases,
    reference=training_days,
    points=1,
    rtol=RTOL,
    atol=ATOL,
    output_names=("days",),
    forbidden=FORBIDDEN,
    features=TIME_FEATURES,
    equivalent=TIME_EQUIVALENT,
    mistakes=TIME_MISTAKES,
)


EXERCISES = [PARAM_COUNT, COMPUTE, MEMORY, KV_CACHE, TRAIN_TIME]
