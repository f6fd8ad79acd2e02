"""From a course model and a text, or from arrays, to an ``AttentionExplorer``.

The query-key view needs each head's queries and keys, and the models keep only the weights
(``attention_maps()``). So ``explore`` records the input of every attention layer during
one forward pass with forward hooks (the model's code stays as it is) and recomputes
q = x W_q, k = x W_k per head with ``split_heads``: the two lines the layer itself runs, on
the very tensors it ran them on. tests/course_lib/test_explorer.py checks that softmax(q k^T / sqrt(d_k)
+ M) gives back ``attention_maps()`` for GPT and for the encoder-decoder Transformer.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from course_lib.attention import causal_mask, split_heads
from course_lib.explorer.widget import AttentionExplorer, AttentionMaps
from course_lib.generate import greedy_decode
from course_lib.tokenize import BOS, BYTE_OFFSET, EOS, SPECIAL_TOKENS
from course_lib.transformer import GPT, Transformer

VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥"}


def token_names(tokenizer, ids) -> list[str]:
    """Display names of token ids: BPE pieces (specials by name) or characters; blanks shown
    as ␣ (space), ⏎ (new line) and ⇥ (tab)."""
    if hasattr(tokenizer, "token_bytes"):  # byte-level BPE: specials have no bytes
        names = [SPECIAL_TOKENS[i] if i < BYTE_OFFSET else tokenizer.token_bytes(i).decode("utf-8", "replace")
                 for i in map(int, ids)]
    else:
        names = [tokenizer.decode([int(i)]) for i in ids]
    return ["".join(VISIBLE.get(c, c) for c in name) for name in names]


def _numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float32).numpy()
    return np.asarray(x)


def _layers(x) -> np.ndarray:
    """(T_q, T_k), (n_heads, T_q, T_k), (n_layers, n_heads, T_q, T_k), or a list with one
    array per layer (each may keep a batch axis of 1) -> (n_layers, n_heads, T_q, T_k).
    The same for queries and keys, with d_k in place of T_k."""
    x = np.stack([_numpy(a) for a in x]) if isinstance(x, (list, tuple)) else _numpy(x)
    if x.ndim == 5:
        if x.shape[1] != 1:
            raise ValueError(f"arrays of shape {x.shape}: explore one sequence of the batch, e.g. a[0]")
        x = x[:, 0]
    if not 2 <= x.ndim <= 4:
        raise ValueError(f"expected (n_layers, n_heads, T_q, T_k) or fewer leading axes, got {x.shape}")
    return x.reshape((1,) * (4 - x.ndim) + x.shape)


def _sides(tokens, T_q: int, T_k: int) -> tuple[list, list]:
    """Tokens for both sides: None (positions), one list (self-attention) or a pair."""
    if tokens is None:
        return [str(i) for i in range(T_q)], [str(j) for j in range(T_k)]
    if len(tokens) == 2 and not any(isinstance(t, str) for t in tokens):
        return list(tokens[0]), list(tokens[1])
    return list(tokens), list(tokens)


def from_arrays(attention, tokens=None, q=None, k=None, masks=None) -> dict[str, AttentionMaps]:
    """{kind: AttentionMaps} from weights (one array, see ``_layers``, or {kind: array}), with
    tokens, q, k and masks given the same way (per kind in dicts when attention is a dict)."""
    if not isinstance(attention, dict):
        attention, tokens, q, k, masks = ({"attention": x} for x in (attention, tokens, q, k, masks))
    maps = {}
    for kind, weights in attention.items():
        A = _layers(weights)
        get = lambda d: None if d is None else d.get(kind)  # noqa: E731
        qk = [None if get(x) is None else _layers(get(x)) for x in (q, k)]
        mask = get(masks)
        maps[kind] = AttentionMaps(A, *_sides(get(tokens), *A.shape[2:]),
                                   mask=None if mask is None else _numpy(mask).astype(bool), q=qk[0], k=qk[1])
    return maps


# --------------------------------------------------------------------------- course models
def _qk(attn, x_q, x_kv):
    """One layer's queries and keys, as the layer computes them: (n_heads, T, d_k) each."""
    q = split_heads(x_q @ attn.W_q, attn.n_heads)  # (1, n_heads, T_q, d_k)
    k = split_heads(x_kv @ attn.W_k, attn.n_heads)  # (1, n_heads, T_k, d_k)
    return _numpy(q[0]), _numpy(k[0])


def _run(model, hooks, *inputs) -> dict:
    """One forward pass in eval mode without gradients; ``hooks``: [(module, kind of hook)].
    Returns {module: (x_q, x_kv)}, the inputs its attention used."""
    seen = {}

    def before(module, args, kwargs):  # MultiHeadAttention.forward(x_q, x_kv=None, mask=None)
        x_kv = args[1] if len(args) > 1 else kwargs.get("x_kv")
        seen[module] = (args[0], args[0] if x_kv is None else x_kv)

    def after(module, args, out):  # GPT's first layer norm: its output is the attention's input
        seen[module] = (out, out)

    handles = [m.register_forward_pre_hook(before, with_kwargs=True) if how == "input"
               else m.register_forward_hook(after) for m, how in hooks]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    return seen


def _ids(tokenizer, text_or_ids) -> list[int]:
    return [int(i) for i in (tokenizer.encode(text_or_ids) if isinstance(text_or_ids, str) else text_or_ids)]


def gpt_maps(model: GPT, text, tokenizer) -> dict[str, AttentionMaps]:
    """The causal self-attention of every block of a course GPT on ``text`` (a string or ids;
    at most block_size tokens, the first ones are kept)."""
    ids = _ids(tokenizer, text)
    if len(ids) > model.block_size:
        warnings.warn(f"{len(ids)} tokens; the model sees {model.block_size}: "
                      f"exploring the first {model.block_size}")
        ids = ids[:model.block_size]
    device = next(model.parameters()).device
    seen = _run(model, [(b.norm1, "output") for b in model.blocks], torch.tensor([ids], device=device))
    q, k = zip(*(_qk(b.attn, *seen[b.norm1]) for b in model.blocks))
    names = token_names(tokenizer, ids)
    return {"self": AttentionMaps(_layers(model.attention_maps()), names, names, mask=causal_mask(len(ids)),
                                  q=np.stack(q), k=np.stack(k), title="self-attention (causal)")}


def transformer_maps(model: Transformer, source, target, tokenizer,
                     max_len: int = 64) -> dict[str, AttentionMaps]:
    """Encoder self-, decoder masked self- and cross-attention of notebook 05's Transformer on
    ``source`` with ``target`` fed to the decoder after <s> (teacher forcing); without a
    target, the model's own greedy output."""
    device = next(model.parameters()).device
    src_ids = _ids(tokenizer, source)
    src = torch.tensor([src_ids], device=device)  # (1, T_src)
    if target is None:
        out = greedy_decode(model, src, max_len)[0].tolist()
        target = out[:out.index(EOS)] if EOS in out else out
    tgt_ids = [BOS] + _ids(tokenizer, target)
    layers = {"encoder": [b.self_attn for b in model.encoder],
              "decoder": [b.self_attn for b in model.decoder],
              "cross": [b.cross_attn for b in model.decoder]}
    seen = _run(model, [(m, "input") for ms in layers.values() for m in ms],
                src, torch.tensor([tgt_ids], device=device))
    maps = model.attention_maps()
    src_names, tgt_names = token_names(tokenizer, src_ids), token_names(tokenizer, tgt_ids)
    sides = {"encoder": (src_names, src_names, None, "encoder self-attention"),
             "decoder": (tgt_names, tgt_names, causal_mask(len(tgt_ids)), "decoder masked self-attention"),
             "cross": (tgt_names, src_names, None, "cross-attention (decoder → encoder)")}
    out = {}
    for kind, (query_tokens, key_tokens, mask, title) in sides.items():
        q, k = zip(*(_qk(m, *seen[m]) for m in layers[kind]))
        out[kind] = AttentionMaps(_layers(maps[kind]), query_tokens, key_tokens, mask=mask,
                                  q=np.stack(q), k=np.stack(k), title=title)
    return out


def explore(what, text=None, tokenizer=None, *, source=None, target=None, tokens=None, q=None, k=None,
            masks=None, **selection) -> AttentionExplorer:
    """The attention explorer, in one call.

    - ``explore(gpt, text, tokenizer)``: a course ``GPT`` on a text (causal self-attention);
    - ``explore(transformer, tokenizer=tok, source=..., target=...)``: notebook 05's
      ``Transformer`` (encoder, decoder and cross-attention); target defaults to the model's
      greedy output. Text, source and target may also be lists of token ids;
    - ``explore(weights, tokens=..., q=..., k=..., masks=...)``: from arrays, weights
      (n_layers, n_heads, T_q, T_k) or fewer leading axes, or {kind: weights} (then tokens,
      q, k and masks are dicts by kind too). tokens: one list (self-attention) or a pair
      (query tokens, key tokens). q, k: (n_layers, n_heads, T, d_k), for the query-key view.

    ``selection``: view ("head", "model", "qk"), kind, layer, head (-1: all), query.
    """
    if isinstance(what, torch.nn.Module):
        if tokenizer is None:
            raise TypeError("explore(model, ...) needs the model's tokenizer: tokenizer=...")
        if isinstance(what, GPT):
            if text is None:
                raise TypeError("explore(gpt, text, tokenizer): give the text to look at")
            maps = gpt_maps(what, text, tokenizer)
        elif isinstance(what, Transformer):
            if source is None:
                raise TypeError("explore(transformer, tokenizer=..., source=..., target=...): "
                                "give the source")
            maps = transformer_maps(what, source, target, tokenizer)
        else:
            raise TypeError(f"explore knows the course's GPT and Transformer, not {type(what).__name__}; "
                            "pass its attention weights as arrays instead")
    else:
        maps = from_arrays(what, tokens, q, k, masks)
    return AttentionExplorer(maps, **selection)
