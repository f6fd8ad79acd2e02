"""GPT-3 by the numbers: parameters, training compute, memory and time (the blog post
and the CS182 slides).

Everything here is arithmetic on the sizes of a decoder-only Transformer, so it runs for
GPT-3 175B as fast as for a toy. The architecture counted is the GPT of notebook 06: Pre-LN
blocks (two layer norms each), multi-head attention with W_q, W_k, W_v (d_model,
n_heads*d_head) and W_o (n_heads*d_head, d_model), an MLP d_model -> d_ff -> d_model, a final
layer norm, a token embedding W_E (vocab_size, d_model), learned positions W_P (n_ctx,
d_model), and an output layer tied to W_E unless said otherwise. The blog post writes the
token embedding in column form as its W_0 (12288 x 50257), and the attention output as W^o.

Units: parameters and tokens are counts, compute in FLOPs (floating-point operations, not
per second), memory in bytes, time in days. ``PFS_DAY`` converts FLOPs to petaflop/s-days.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# -------------------------------------------------------------------------- the sources' data
# The blog post, "GPT-3": d = 12288, 96 layers of 96 heads of size 128, T = 2048, a vocabulary of
# 50257 tokens, W_1 (49152 x 12288) and W_2 (12288 x 49152): d_ff = 4 d.
GPT3_175B = dict(n_layers=96, d_model=12288, n_heads=96, vocab_size=50257, n_ctx=2048,
                 d_ff=4 * 12288, d_head=128)
VOCAB_SIZE, N_CTX = 50257, 2048  # every GPT-3 model (the GPT-3 paper's Table 2.1, CS182 slides)
TRAINING_TOKENS = 300e9  # Table 2.1: "All models were trained for a total of 300 billion tokens."


@dataclass(frozen=True)
class TableRow:
    """One row of Table 2.1 on the CS182 slides (batch size in tokens), exactly as printed."""
    name: str
    n_params: float
    n_layers: int
    d_model: int
    n_heads: int
    d_head: int
    batch_tokens: float
    learning_rate: float


# Two rows do not satisfy n_heads * d_head = d_model: GPT-3 XL (24 x 128 = 3072, not 2048)
# and GPT-3 13B (40 x 128 = 5120, not 5140). The rows are kept as printed; the counts below
# take the attention width to be d_model (see ``param_breakdown``), which puts every row
# within 3% of its n_params, and 13B within 3% with either 5140 or 5120.
TABLE_2_1 = (
    TableRow("GPT-3 Small", 125e6, 12, 768, 12, 64, 0.5e6, 6.0e-4),
    TableRow("GPT-3 Medium", 350e6, 24, 1024, 16, 64, 0.5e6, 3.0e-4),
    TableRow("GPT-3 Large", 760e6, 24, 1536, 16, 96, 0.5e6, 2.5e-4),
    TableRow("GPT-3 XL", 1.3e9, 24, 2048, 24, 128, 1e6, 2.0e-4),
    TableRow("GPT-3 2.7B", 2.7e9, 32, 2560, 32, 80, 1e6, 1.6e-4),
    TableRow("GPT-3 6.7B", 6.7e9, 32, 4096, 32, 128, 2e6, 1.2e-4),
    TableRow("GPT-3 13B", 13.0e9, 40, 5140, 40, 128, 2e6, 1.0e-4),
    TableRow("GPT-3 175B", 175.0e9, 96, 12288, 96, 128, 3.2e6, 0.6e-4),
)

# CS182 slides, Table 2.2: (dataset, tokens in it, weight in the training mix, epochs in 300B)
TABLE_2_2 = (
    ("Common Crawl (filtered)", 410e9, 0.60, 0.44),
    ("WebText2", 19e9, 0.22, 2.9),
    ("Books1", 12e9, 0.08, 1.9),
    ("Books2", 55e9, 0.08, 0.43),
    ("Wikipedia", 3e9, 0.03, 3.4),
)

# Kaplan et al. 2020, "Scaling Laws for Neural Language Models" (arXiv:2001.08361), eq. 1.1:
# test loss L(N) = (N_c / N) ** alpha_N in nats per token (WebText2, their BPE), N the number
# of non-embedding parameters, for models trained to convergence on enough data.
KAPLAN_ALPHA_N = 0.076
KAPLAN_N_C = 8.8e13


# ---------------------------------------------------------------------------- parameters
def param_breakdown(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff=None, d_head=None, *,
                    tied=True, biases=True, attention_biases=None, layernorm=True,
                    learned_positions=True) -> dict[str, int]:
    """Parameters of a GPT, by part: embeddings, positions, attention, mlp, layernorms, output.

    d_ff defaults to 4 * d_model. The attention width n_heads * d_head defaults to d_model
    (d_head = d_model / n_heads), so that n_heads does not change the count: more heads are
    narrower heads. Per block, with a = n_heads * d_head:
        attention  3 d a + a d  (W_q, W_k, W_v, W_o)  + 3 a + d  (their biases)
        mlp        2 d d_ff     (W_1, W_2)            + d_ff + d (their biases)
        layernorms 2 * 2 d      (gamma and beta of the two LNs)
    and once: the final LN (2 d), W_E (vocab_size d), W_P (n_ctx d), and the output matrix
    (vocab_size d, no bias) only when it is not tied to W_E. ``attention_biases`` (default:
    ``biases``) lets the course's GPT, whose attention has no biases, be counted too.
    """
    d = d_model
    a = d if d_head is None else n_heads * d_head
    d_ff = 4 * d if d_ff is None else d_ff
    attention_biases = biases if attention_biases is None else attention_biases
    attention = 4 * d * a + (3 * a + d if attention_biases else 0)
    mlp = 2 * d * d_ff + (d_ff + d if biases else 0)
    return {"embeddings": vocab_size * d,
            "positions": n_ctx * d if learned_positions else 0,
            "attention": n_layers * attention,
            "mlp": n_layers * mlp,
            "layernorms": (n_layers * 4 * d + 2 * d) if layernorm else 0,
            "output": 0 if tied else vocab_size * d}


def param_count(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff=None, d_head=None, *,
                tied=True, biases=True, attention_biases=None, layernorm=True,
                learned_positions=True) -> int:
    """Total parameters of a GPT (the sum of ``param_breakdown``, same arguments).

    About 12 n_layers d_model^2 for a wide model: 4 d^2 in attention and 8 d^2 in the MLP per
    block. The blog post's GPT-3 (96 layers, d_model 12288) gives 174.6 billion.
    """
    return int(sum(param_breakdown(n_layers, d_model, n_heads, vocab_size, n_ctx, d_ff, d_head,
                                   tied=tied, biases=biases, attention_biases=attention_biases,
                                   layernorm=layernorm,
                                   learned_positions=learned_positions).values()))


def non_embedding_params(*args, **kwargs) -> int:
    """Kaplan et al. 2020's N: every parameter except the vocabulary and position matrices
    (W_E, W_P and an untied output matrix); same arguments as ``param_count``.

    Kaplan et al. also leave out biases and layer norms (N = 2 d_model n_layers (2 d_attn +
    d_ff)); this count keeps them, which adds about 13 d_model per block, a fraction of a
    percent for any model worth fitting a scaling law to.
    """
    parts = param_breakdown(*args, **kwargs)
    return int(parts["attention"] + parts["mlp"] + parts["layernorms"])


def table_2_1_counts(d_model_13b: int = 5140) -> list[tuple[TableRow, int, float]]:
    """(row, our count, relative error against the row's n_params) for every row of Table 2.1,
    with GPT-3's vocabulary and context, tied output, d_ff = 4 d_model, attention width d_model.
    ``d_model_13b`` replaces the 13B row's 5140 (pass 5120 = 40 x 128 to try the other)."""
    out = []
    for row in TABLE_2_1:
        d = d_model_13b if row.name == "GPT-3 13B" else row.d_model
        n = param_count(row.n_layers, d, row.n_heads, VOCAB_SIZE, N_CTX)
        out.append((row, n, n / row.n_params - 1))
    return out


# ---------------------------------------------------------------------------- compute
PFS_DAY = 1e15 * 86400  # one petaflop/s for a day: 1e15 FLOP/s x 86400 s = 8.64e19 FLOPs


def training_flops(n_params, n_tokens) -> float:
    """Training compute C ~ 6 N D FLOPs for N parameters and D training tokens.

    A weight w in a matrix product is used once per token: one multiply and one add, 2 FLOPs
    in the forward pass. The backward pass needs two products per weight: dL/dx = dL/dy w
    (to pass the gradient on) and dL/dw += dL/dy x (to update w), 4 FLOPs. So 2 + 4 = 6
    FLOPs per parameter per token. Attention's T x T score products have no parameters and
    add about 3 x 2 n_layers T d_model per token (Kaplan et al. 2020, Table 1, forward x 3),
    1.4% for GPT-3 at T = 2048; they are left out, as in the CS182 slides' case study.
    """
    return 6.0 * n_params * n_tokens


def pfs_days(flops) -> float:
    """FLOPs in petaflop/s-days (``PFS_DAY`` = 8.64e19 FLOPs each)."""
    return flops / PFS_DAY


def case_study() -> dict[str, float]:
    """The CS182 slide "Case Study: GPT-3" against Tables 2.1 and 2.2, in PF-days.

    The CS182 slide says 175 billion parameters, 500 billion training tokens and 50 PF-days. Only
    the first holds for the training run:
    * 500 billion is the size of the data mix, not what was trained on: Table 2.2's quantities
      add up to 410 + 19 + 12 + 55 + 3 = 499 billion tokens, while Table 2.1 says every model
      saw 300 billion (so Common Crawl, 60% of the mix, ran 0.6 x 300 / 410 = 0.44 epochs).
    * 50 PF-days is Figure 2.2's figure for GPT-3 3B (Table 2.1's 2.7B) and RoBERTa-Large,
      "both models took roughly 50 petaflop/s-days": 6 x 2.7e9 x 300e9 = 4.9e21 FLOPs = 56.
    * GPT-3 175B on 300 billion tokens: 6 x 174.6e9 x 300e9 = 3.14e23 FLOPs = 3640 PF-days,
      about 70 times the CS182 slide's number. (Its own 175B x 500B would be 6060.)
    """
    n_175b = param_count(**GPT3_175B)
    return {"data_mix_tokens": sum(tokens for _, tokens, _, _ in TABLE_2_2),
            "pfs_days_175b_300b": pfs_days(training_flops(n_175b, TRAINING_TOKENS)),
            "pfs_days_175b_500b": pfs_days(training_flops(n_175b, 500e9)),
            "pfs_days_2.7b_300b": pfs_days(training_flops(2.7e9, TRAINING_TOKENS)),
            "flops_175b_300b": training_flops(n_175b, TRAINING_TOKENS)}


def training_days(flops, n_devices, peak_flops_per_device, utilisation) -> float:
    """Wall-clock days to do ``flops`` on ``n_devices`` accelerators, each with a peak of
    ``peak_flops_per_device`` FLOP/s of which the fraction ``utilisation`` (0 < u <= 1) is
    achieved: flops / (n_devices x peak x utilisation) seconds, / 86400."""
    return flops / (n_devices * peak_flops_per_device * utilisation) / 86400


# ---------------------------------------------------------------------------- memory
ADAM_STATE_BYTES = 4  # Adam's first and second moments are kept in fp32
STATES = {"adam": 2, "momentum": 1, "sgd": 0}  # optimizer states per parameter


def training_memory_bytes(n_params, bytes_per_param=2, optimizer="adam",
                          master_weights=True) -> dict[str, float]:
    """Bytes of training state for N parameters, activations not included.

    The convention of mixed-precision training with Adam (Rajbhandari et al. 2020, "ZeRO"):
    weights and gradients in the working precision (``bytes_per_param``: 2 for fp16/bf16,
    4 for fp32), an fp32 master copy of the weights that the optimizer updates (4 bytes,
    ``master_weights``; pass False for plain fp32 training), and Adam's two moments in fp32
    (4 + 4 bytes). Mixed precision with Adam: 2 + 2 + 4 + 4 + 4 = 16 bytes per parameter;
    plain fp32 with Adam: 4 + 4 + 4 + 4 = 16 as well.
    Returns weights, gradients, master, adam_m, adam_v and total, in bytes.
    """
    n_states = STATES[optimizer]
    out = {"weights": n_params * bytes_per_param,
           "gradients": n_params * bytes_per_param,
           "master": n_params * 4 if master_weights else 0,
           "adam_m": n_params * ADAM_STATE_BYTES if n_states >= 1 else 0,
           "adam_v": n_params * ADAM_STATE_BYTES if n_states >= 2 else 0}
    out["total"] = sum(out.values())
    return out


def kv_cache_bytes(n_layers, d_model, batch, context, bytes_per_value=2) -> float:
    """Bytes of a KV cache: every layer keeps a key and a value vector of d_model numbers
    (all heads together) for each of ``context`` positions of each of ``batch`` sequences:
    2 x n_layers x d_model x batch x context x bytes_per_value."""
    return 2 * n_layers * d_model * batch * context * bytes_per_value


# ---------------------------------------------------------------------------- scaling laws
def fit_power_law(n, loss) -> tuple[float, float]:
    """Fit loss = (N_c / n) ** alpha by least squares on log-log axes; returns (N_c, alpha).

    log loss = alpha log N_c - alpha log n is a straight line in log n with slope -alpha and
    intercept alpha log N_c. n: (k,) parameter counts, loss: (k,) losses, k >= 2.
    """
    slope, intercept = np.polyfit(np.log(np.asarray(n, float)), np.log(np.asarray(loss, float)), 1)
    alpha = -slope
    return float(np.exp(intercept / alpha)), float(alpha)


def plot_power_law(n, loss, fit=None, published=None):
    """Loss against parameters on log-log axes; returns the figure.

    fit: (N_c, alpha) drawn as a line. published: (N_c, alpha), e.g. (KAPLAN_N_C,
    KAPLAN_ALPHA_N), drawn with its slope only, through the middle of the data: its level
    belongs to another data set and tokenizer, only its exponent is comparable.
    """
    import matplotlib.pyplot as plt  # lazy: 0.5 s, for the plot alone; the references are numpy

    n, loss = np.asarray(n, float), np.asarray(loss, float)
    grid = np.geomspace(n.min(), n.max(), 50)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(n, loss, "o", label="measured")
    if fit is not None:
        ax.loglog(grid, (fit[0] / grid) ** fit[1], "-", label=f"fit: alpha = {fit[1]:.3f}")
    if published is not None:
        n_mid, loss_mid = np.exp(np.log(n).mean()), np.exp(np.log(loss).mean())
        ax.loglog(grid, loss_mid * (n_mid / grid) ** published[1], "--",
                  label=f"published slope: alpha = {published[1]:.3f}")
    ax.set_xlabel("non-embedding parameters N")
    ax.set_ylabel("validation loss (nats per token)")
    ax.legend()
    fig.tight_layout()
    return fig
