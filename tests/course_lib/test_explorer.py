"""course_lib.explorer: arrays and course models in, a widget whose state is checked, data
that travel compactly, a static picture where widgets cannot run, pages that need no network,
and a wheel that carries every file the browser loads. (The browser itself: test_jupyterlab.py.)"""
import base64
import json
import re
import zipfile

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import traitlets  # noqa: E402

from course_lib import viz  # noqa: E402
from course_lib.attention import causal_mask  # noqa: E402
from course_lib.explorer import AttentionExplorer, explore, from_arrays, token_names  # noqa: E402
from course_lib.explorer import widget as widget_module  # noqa: E402
from course_lib.explorer.static import query_key  # noqa: E402
from course_lib.tokenize import BOS, FIRST_MERGE_ID, BPETokenizer, CharTokenizer  # noqa: E402
from course_lib.transformer import GPT, GPTConfig, Transformer, TransformerConfig  # noqa: E402
from helpers import REPO  # noqa: E402

URL = re.compile(r"https?://", re.IGNORECASE)


def _softmax_rows(S):
    E = np.exp(S - S.max(-1, keepdims=True))
    return E / E.sum(-1, keepdims=True)


def _random_attention(L=2, H=3, T_q=5, T_k=7, d_k=4, seed=0, mask=None):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((L, H, T_q, d_k)), rng.standard_normal((L, H, T_k, d_k))
    S = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    return _softmax_rows(S), q, k


def _unpack(explorer):
    """What widget.js reads from `_meta` and `_data`, in numpy."""
    raw = np.frombuffer(explorer._data, np.uint8)
    out = {}
    for kind in explorer._meta["kinds"]:
        L, H, T_q, T_k, d_k, o = (kind[x] for x in ("n_layers", "n_heads", "T_q", "T_k", "d_k", "offsets"))
        assert all(v == -1 or v % 8 == 0 for v in o.values())
        out[kind["name"]] = {
            "weights": raw[o["weights"]:o["weights"] + L * H * T_q * T_k].reshape(L, H, T_q, T_k),
            "mask": None if o["mask"] < 0 else raw[o["mask"]:o["mask"] + T_q * T_k].reshape(T_q, T_k),
            **{x: None if o[x] < 0 else raw[o[x]:o[x] + 2 * L * H * T * d_k].view("<f2").reshape(L, H, T, d_k)
               for x, T in (("q", T_q), ("k", T_k))},
        }
    return out


# ----------------------------------------------------------------------------- arrays in
def test_arrays_of_any_rank_become_layers_by_heads():
    A, q, k = _random_attention()
    one_head = from_arrays(A[0, 0])["attention"]
    assert one_head.shape == (1, 1, 5, 7) and one_head.query_tokens == list("01234")
    per_layer = from_arrays([torch.tensor(a[None]) for a in A], tokens=(list("abcde"), list("ABCDEFG")))
    assert per_layer["attention"].shape == (2, 3, 5, 7)  # a list of (B=1, H, T_q, T_k), as attention_maps()
    assert per_layer["attention"].key_tokens == list("ABCDEFG")
    kinds = from_arrays({"x": A, "y": A[1]}, tokens={"x": (list("abcde"), list("ABCDEFG"))},
                        q={"x": q}, k={"x": k}, masks={"y": np.ones((5, 7), bool)})
    assert kinds["x"].q.shape == (2, 3, 5, 4) and kinds["y"].q is None and kinds["y"].mask.all()
    with pytest.raises(ValueError, match="one sequence of the batch"):
        from_arrays(np.ones((2, 4, 3, 5, 5)))
    with pytest.raises(ValueError, match="query and"):
        from_arrays(A, tokens=["too", "few", "tokens"])
    with pytest.raises(ValueError, match="both q and k"):
        from_arrays(A, q=q)


def test_selection_is_validated_and_kept_inside_the_kind():
    A, _, _ = _random_attention()
    small = A[:1, :2, :3, :3] / A[:1, :2, :3, :3].sum(-1, keepdims=True)
    ex = explore({"big": A, "small": small}, layer=1, head=2, query=4)
    assert (ex.view, ex.kind, ex.layer, ex.head, ex.query) == ("head", "big", 1, 2, 4)
    for name, bad in (("view", "neuron"), ("kind", "cross"), ("layer", 2), ("head", -2), ("head", 3),
                      ("query", 5)):
        with pytest.raises(traitlets.TraitError):
            setattr(ex, name, bad)
    ex.kind = "small"  # the selection moves inside the smaller sizes
    assert (ex.layer, ex.head, ex.query) == (0, 1, 2)
    ex.head = -1  # all heads
    ex.kind = "big"
    assert (ex.layer, ex.head, ex.query) == (0, -1, 2)
    with pytest.raises(traitlets.TraitError):
        explore(A, layer=5)
    # as the browser sends it: several traits in one message, checked against the new kind
    ex.set_state({"kind": "small", "layer": 0, "query": 1})
    assert (ex.kind, ex.query) == ("small", 1)
    assert "2 layers x 3 heads" in repr(ex) and "query 1" in repr(ex)


def test_data_travel_as_uint8_weights_and_float16_queries_and_keys():
    mask = causal_mask(5, 7)
    A, q, k = _random_attention(mask=mask)
    ex = explore({"a": A, "b": A[1]}, q={"a": q}, k={"a": k}, masks={"a": mask})
    sent = _unpack(ex)
    assert np.array_equal(sent["a"]["weights"], np.rint(A * 255).astype(np.uint8))
    assert np.array_equal(sent["a"]["mask"], mask.astype(np.uint8))
    np.testing.assert_allclose(sent["a"]["q"], q, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(sent["a"]["k"], k, rtol=1e-3, atol=1e-3)
    assert sent["b"]["q"] is None and sent["b"]["mask"] is None and sent["b"]["weights"].shape == (1, 3, 5, 7)
    # 12 layers x 12 heads x 512 tokens: one byte per weight
    _, data = widget_module.pack(from_arrays(np.zeros((1, 1, 512, 512))))
    assert len(data) == 512 * 512


def test_viz_attention_explorer_opens_the_toy_examples():
    examples = viz.toy_attention_examples()
    ex = viz.attention_explorer(examples, masks={"causal": causal_mask(6)})
    assert isinstance(ex, AttentionExplorer) and list(ex.maps) == ["self", "causal", "cross"]
    cross = ex.maps["cross"]
    assert cross.shape == (1, 2, 6, 6)
    assert cross.query_tokens == viz.GERMAN and cross.key_tokens == viz.ENGLISH
    assert ex.maps["causal"].mask.sum() == 21 and ex.maps["self"].mask is None


# ----------------------------------------------------------------------------- course models
def _check_queries_and_keys(maps):
    """softmax(q k^T / sqrt(d_k) + M) is the weights the model computed (float32 tolerance)."""
    for layer in range(maps.shape[0]):
        for head in range(maps.shape[1]):
            for i in range(maps.shape[2]):
                _, _, weights = query_key(maps, layer, head, i)
                np.testing.assert_allclose(weights, maps.weights[layer, head, i], atol=2e-5)


def test_gpt_on_a_text_gives_causal_maps_with_its_queries_and_keys():
    torch.manual_seed(0)
    text = "To be, or not\nto be"
    tok = CharTokenizer.from_text(text)
    gpt = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=32, d_model=16, n_heads=2, n_layers=3))
    gpt.train()
    ex = explore(gpt, text, tok, view="model")
    assert gpt.training  # put back as it was
    (maps,) = ex.maps.values()
    assert maps.shape == (3, 2, len(text), len(text)) and maps.q.shape == (3, 2, len(text), 8)
    assert maps.query_tokens[:3] == ["T", "o", "␣"] and "⏎" in maps.query_tokens
    assert np.array_equal(maps.mask, causal_mask(len(text)))
    assert np.allclose(np.triu(maps.weights, 1), 0)  # the causal structure is in the data
    _check_queries_and_keys(maps)
    with pytest.warns(UserWarning, match="exploring the first 32"):
        assert explore(gpt, text * 3, tok).current.shape[2] == 32
    with pytest.raises(TypeError, match="tokenizer"):
        explore(gpt, text)


def test_transformer_gives_encoder_decoder_and_cross_maps():
    torch.manual_seed(0)
    tok = BPETokenizer.train(["Mon 21 Mar 94", "1994-03-21"], vocab_size=FIRST_MERGE_ID + 8)
    config = TransformerConfig(vocab_size=tok.vocab_size, d_model=16, n_heads=2, d_ff=32, n_layers=2)
    model = Transformer(config)
    ex = explore(model, tokenizer=tok, source="Mon 21 Mar 94", target="1994-03-21")
    assert list(ex.maps) == ["encoder", "decoder", "cross"]
    S, T = len(tok.encode("Mon 21 Mar 94")), len(tok.encode("1994-03-21")) + 1  # <s> + target
    assert ex.maps["encoder"].shape == (2, 2, S, S) and ex.maps["cross"].shape == (2, 2, T, S)
    assert ex.maps["decoder"].query_tokens[0] == "<s>"
    assert ex.maps["cross"].key_tokens == [t.replace(" ", "␣") for t in tok.tokens("Mon 21 Mar 94")]
    assert np.array_equal(ex.maps["decoder"].mask, causal_mask(T)) and ex.maps["cross"].mask is None
    for maps in ex.maps.values():
        _check_queries_and_keys(maps)
    greedy = explore(model, tokenizer=tok, source=tok.encode("Mon 21 Mar 94"))  # ids; target: its own output
    assert greedy.maps["decoder"].query_tokens[0] == "<s>" and greedy.maps["cross"].shape[3] == S
    assert "".join(token_names(tok, [BOS] + tok.encode(" M"))) == "<s>␣M"


# ----------------------------------------------------------------------------- without widgets
def _entropy(A):
    """Entropy of each row of weights (..., T_k), by torch's Categorical, not the explorer's code."""
    return torch.distributions.Categorical(probs=torch.as_tensor(A)).entropy().numpy()


def test_explorer_opens_on_the_least_concentrated_query():
    """Not query 0 of a causal map (one key, weight 1: the picture shows nothing) but the query
    whose weights spread the most, in the selected layer and head (or the heads' mean)."""
    A, q, k = _random_attention(T_q=6, T_k=6, mask=causal_mask(6))
    assert np.allclose(A[..., 0, 0], 1.0)  # the trivial query
    ex = explore(A, q=q, k=k, masks=causal_mask(6), layer=1, head=2)
    assert ex.query == np.argmax(_entropy(A[1, 2])) and ex.query > 0 and A[1, 2, ex.query].max() < 1
    assert f"weights of query {ex.query} " in ex.static().axes[1].get_title()  # the grader's picture
    everything = explore(A, head=-1)
    assert everything.query == np.argmax(_entropy(A[0].mean(0)))
    # the most spread query need not be the last one
    spread = np.eye(4)[None, None].repeat(2, axis=1)  # (1, 2, 4, 4): every query on itself
    spread[0, 1, 2] = [0.3, 0.4, 0.3, 0.0]
    assert widget_module.informative_query(from_arrays(spread)["attention"], 0, 1) == 2
    assert widget_module.informative_query(from_arrays(spread)["attention"], 0, 0) == 0  # a tie: the first
    assert explore(A, query=0).query == 0  # a query asked for is kept


def test_static_picture_follows_the_selection():
    A, q, k = _random_attention(mask=causal_mask(5, 7))
    ex = explore(A, tokens=(list("abcde"), list("ABCDEFG")), q=q, k=k, masks=causal_mask(5, 7), query=0)
    head = ex.static()
    assert "layer 1, head 0" in head.axes[0].get_title() and "query 0 'a'" in head.axes[1].get_title()
    ex.layer, ex.head, ex.query = 1, 2, 3
    head = ex.static()
    assert "layer 2, head 2" in head.axes[0].get_title() and "query 3 'd'" in head.axes[1].get_title()
    assert np.allclose(head.axes[0].images[0].get_array(), A[1, 2])
    assert np.ma.getmaskarray(head.axes[0].images[0].get_array()).sum() == (~causal_mask(5, 7)).sum()
    ex.head = -1
    assert "mean of the heads" in ex.static().axes[0].get_title()
    model = ex.static("model")
    assert [t.get_text() for t in model.axes[0].get_yticklabels()] == ["layer 1", "layer 2"]
    ex.head = 1
    qk = ex.static("qk")
    assert "query 3 'd', layer 2, head 1" in qk.axes[0].get_title()
    products, scores, weights = query_key(ex.current, 1, 1, 3)
    assert np.allclose(qk.axes[0].images[0].get_array(), products)
    assert np.isinf(scores[6:]).all() and np.isfinite(scores[:6]).all()  # query 3 sits at position 5
    assert np.allclose(weights, A[1, 1, 3])
    no_qk = explore(A)  # no queries and keys: the query-key view falls back to the head view
    assert no_qk.static("qk").axes[0].get_title().startswith("attention, layer 1")


def test_displayed_output_carries_a_png_and_an_offline_html_copy(monkeypatch):
    ex = viz.attention_explorer(viz.toy_attention_examples())
    data, _ = ex._repr_mimebundle_()
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == ex.model_id
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG")
    html = data["text/html"]
    assert '<img class="ax-fallback"' in html and '<script type="module">' in html and not URL.search(html)
    monkeypatch.setattr(widget_module, "INLINE_HTML_LIMIT", 10)  # large data: the PNG only
    data, _ = ex._repr_mimebundle_()
    assert "text/html" not in data and "image/png" in data


def test_saved_page_is_self_contained(tmp_path):
    A, q, k = _random_attention()
    ex = explore(A, tokens=(list("abcde"), list("ABCDEFG")), q=q, k=k, view="qk", layer=1, query=2)
    page = ex.save_html(tmp_path / "heads.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and not URL.search(page)
    assert (widget_module.HERE / "widget.css").read_text() in page
    scripts = dict(re.findall(r'<script type="[^"]+" id="ax-[0-9a-f]+(-\w+)">(.*?)</script>', page, re.S))
    assert set(scripts) == {"-state", "-data", "-module"}
    assert scripts["-module"] == (widget_module.HERE / "widget.js").read_text()
    assert base64.b64decode(scripts["-data"]) == ex._data
    state = json.loads(scripts["-state"])
    assert (state["view"], state["layer"], state["query"], state["_meta"]) == ("qk", 1, 2, ex._meta)


# ----------------------------------------------------------------------------- what ships
def test_the_wheel_carries_every_file_the_browser_loads_and_no_url(tmp_path):
    hatchling = pytest.importorskip("hatchling.builders.wheel")
    for name in widget_module.ASSETS:
        text = (widget_module.HERE / name).read_text()
        assert not URL.search(text), f"{name} names a network address"
        assert "</" not in text or name.endswith(".css"), f"{name} could close a <script> early"
        assert not re.search(r"^\s*import\s|\bimport\s*\(\s*['\"]|@import|url\(", text, re.M), \
            f"{name} loads something: everything must be inline"
    assert str(AttentionExplorer._esm) == (widget_module.HERE / "widget.js").read_text()
    assert str(AttentionExplorer._css) == (widget_module.HERE / "widget.css").read_text()
    (wheel,) = hatchling.WheelBuilder(str(REPO)).build(directory=str(tmp_path), versions=["standard"])
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"course_lib/explorer/{name}" for name in widget_module.ASSETS} <= names
