"""The attention explorer widget: one Python class and the ES module it ships (widget.js).

``AttentionExplorer`` holds one ``AttentionMaps`` per kind of attention ("encoder",
"decoder", "cross" for notebook 05's Transformer; "self" for GPT) and the selection (view,
kind, layer, head, query) as synced traits. The data travel to the browser once, compactly:
weights as uint8 (round(255 a); 12 layers x 12 heads x 512 x 512 tokens is 36 MiB), the
mask as uint8, queries and keys as float16; the browser draws with canvases, so clicks and
hovering never wait for the kernel.

Three ways out besides the live widget: the displayed output also carries a PNG of the
current picture (``static()``, drawn by matplotlib) for front ends without widgets, and,
for small data, an offline HTML copy for nbconvert; ``save_html(path)`` writes one
self-contained page. Nothing is ever fetched from the network.
"""
from __future__ import annotations

import base64
import io
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import anywidget
import numpy as np
import traitlets

HERE = Path(__file__).parent
ASSETS = ("widget.js", "widget.css", "standalone.js")  # everything the widget and its pages load
VIEWS = ("head", "model", "qk")
INLINE_HTML_LIMIT = 4 * 2**20  # bytes of `_data` up to which a displayed output carries HTML


@dataclass
class AttentionMaps:
    """One kind of attention of a model, every layer and head.

    weights: (n_layers, n_heads, T_q, T_k), rows sum to 1; query_tokens: T_q strings,
    key_tokens: T_k strings; mask: boolean (T_q, T_k), True where query i may attend to key j,
    or None; q: (n_layers, n_heads, T_q, d_k) and k: (n_layers, n_heads, T_k, d_k), the
    queries and keys whose scaled dot products gave the weights (optional: the query-key view
    needs them); title: the name shown on the kind's button.
    """

    weights: np.ndarray
    query_tokens: list[str]
    key_tokens: list[str]
    mask: np.ndarray | None = None
    q: np.ndarray | None = None
    k: np.ndarray | None = None
    title: str = ""

    def __post_init__(self):
        self.weights = np.asarray(self.weights)
        L, H, T_q, T_k = self.weights.shape
        self.query_tokens = [str(t) for t in self.query_tokens]
        self.key_tokens = [str(t) for t in self.key_tokens]
        if (len(self.query_tokens), len(self.key_tokens)) != (T_q, T_k):
            raise ValueError(f"{len(self.query_tokens)} query and {len(self.key_tokens)} key tokens "
                             f"for weights of shape {self.weights.shape} (n_layers, n_heads, T_q, T_k)")
        if self.mask is not None:
            self.mask = np.broadcast_to(np.asarray(self.mask, dtype=bool), (T_q, T_k))
        if (self.q is None) != (self.k is None):
            raise ValueError("give both q and k, or neither")
        if self.q is not None:
            self.q, self.k = np.asarray(self.q), np.asarray(self.k)
            d_k = self.q.shape[-1]
            if self.q.shape != (L, H, T_q, d_k) or self.k.shape != (L, H, T_k, d_k):
                raise ValueError(f"q {self.q.shape} and k {self.k.shape} do not match weights "
                                 f"{self.weights.shape}: expected (n_layers, n_heads, T, d_k)")

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return self.weights.shape


def informative_query(m: AttentionMaps, layer: int = 0, head: int = 0) -> int:
    """The query whose weights in ``layer`` and ``head`` (-1: the mean of the heads) are the
    least concentrated: the largest entropy -sum_j a_ij log a_ij, the first one on ties.

    Where the explorer opens when no query is asked for: under a causal mask query 0 sees one
    key and puts weight 1 on it (entropy 0), a picture that shows nothing about the head.
    """
    A = (m.weights[layer].mean(0) if head < 0 else m.weights[layer, head]).astype(np.float64)  # (T_q, T_k)
    entropy = -(A * np.log(np.where(A > 0, A, 1.0))).sum(-1)  # (T_q,); 0 log 0 = 0
    return int(np.argmax(entropy))


def pack(maps: dict[str, AttentionMaps]) -> tuple[dict, bytes]:
    """The `_meta` JSON and the `_data` buffer that widget.js unpacks (offsets in bytes,
    -1 for an absent array; each array starts on a multiple of 8)."""
    chunks, size, kinds = [], 0, []

    def put(array) -> int:
        nonlocal size
        if array is None:
            return -1
        chunks.append(b"\0" * (-size % 8))
        size += len(chunks[-1])
        start = size
        for part in array:  # one layer at a time: no full-size float temporaries
            raw = np.ascontiguousarray(part).tobytes()
            chunks.append(raw)
            size += len(raw)
        return start

    for name, m in maps.items():
        L, H, T_q, T_k = m.shape
        offsets = {
            "weights": put(np.rint(np.clip(w, 0.0, 1.0) * 255).astype(np.uint8) for w in m.weights),
            "mask": put(None if m.mask is None else [m.mask.astype(np.uint8)]),
            "q": put(None if m.q is None else (x.astype("<f2") for x in m.q)),
            "k": put(None if m.k is None else (x.astype("<f2") for x in m.k)),
        }
        kinds.append({"name": name, "title": m.title or name, "n_layers": L, "n_heads": H,
                      "T_q": T_q, "T_k": T_k, "d_k": 0 if m.q is None else m.q.shape[-1],
                      "query_tokens": m.query_tokens, "key_tokens": m.key_tokens, "offsets": offsets})
    return {"kinds": kinds}, b"".join(chunks)


def _script_text(text: str) -> str:
    """Text that can sit inside a <script> element: no "</" can close it early."""
    return text.replace("</", "<\\/")


class AttentionExplorer(anywidget.AnyWidget):
    """Head view, model view and query-key view over one or more kinds of attention.

    ``maps``: {kind: AttentionMaps}. The selection is in the traits ``view`` ("head",
    "model" or "qk"), ``kind``, ``layer`` (0-based; shown from 1), ``head`` (-1: all heads
    in colours) and ``query`` (a query token's index; by default ``informative_query``); the
    browser and Python change them alike. Build one from a course model or from arrays with
    ``course_lib.explorer.explore``.
    """

    _esm = HERE / "widget.js"
    _css = HERE / "widget.css"
    view = traitlets.Unicode("head").tag(sync=True)
    kind = traitlets.Unicode("").tag(sync=True)
    layer = traitlets.Int(0).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    query = traitlets.Int(0).tag(sync=True)
    _meta = traitlets.Dict().tag(sync=True)
    _data = traitlets.Bytes().tag(sync=True)

    def __init__(self, maps: dict[str, AttentionMaps], **selection):
        if not maps:
            raise ValueError("no attention to explore")
        self.maps = dict(maps)
        meta, data = pack(self.maps)
        selection.setdefault("kind", next(iter(self.maps)))
        super().__init__(_meta=meta, _data=data, **selection)
        if "query" not in selection:  # after the checks: layer and head are in range now
            self.query = informative_query(self.current, self.layer, self.head)

    @property
    def current(self) -> AttentionMaps:
        """The maps of the selected kind."""
        return self.maps[self.kind]

    def _limit(self, name: str) -> tuple[int, int]:
        L, H, T_q, _ = self.current.shape
        return {"layer": (0, L - 1), "head": (-1, H - 1), "query": (0, T_q - 1)}[name]

    @traitlets.validate("view")
    def _check_view(self, proposal):
        if proposal.value not in VIEWS:
            raise traitlets.TraitError(f"view must be one of {', '.join(VIEWS)}, not {proposal.value!r}")
        return proposal.value

    @traitlets.validate("kind")
    def _check_kind(self, proposal):
        if proposal.value not in self.maps:
            raise traitlets.TraitError(f"kind must be one of {', '.join(self.maps)}, not {proposal.value!r}")
        return proposal.value

    @traitlets.validate("layer", "head", "query")
    def _check_index(self, proposal):
        name = proposal.trait.name
        if self.kind not in self.maps:  # still being built: the kind comes with the selection
            return proposal.value
        lo, hi = self._limit(name)
        if not lo <= proposal.value <= hi:
            raise traitlets.TraitError(f"{name} must be in {lo}..{hi} for {self.kind!r}, "
                                       f"not {proposal.value}")
        return proposal.value

    @traitlets.observe("kind")
    def _keep_in_range(self, change):
        for name in ("layer", "head", "query"):
            lo, hi = self._limit(name)
            setattr(self, name, min(max(getattr(self, name), lo), hi))

    def __repr__(self) -> str:
        kinds = "; ".join("{}: {} layers x {} heads, {} -> {} tokens".format(k, *m.shape)
                          for k, m in self.maps.items())
        return (f"AttentionExplorer({kinds}; showing the {self.view} view of {self.kind}, "
                f"layer {self.layer + 1}, head {'all' if self.head < 0 else self.head}, query {self.query})")

    # ------------------------------------------------------------------ where widgets cannot run
    def static(self, view: str | None = None):
        """The current picture as a matplotlib Figure (for feedback reports and terminals)."""
        from course_lib.explorer.static import figure  # lazy: matplotlib (0.6 s), for this alone

        return figure(self, view or self.view)

    def png(self, dpi: int = 80) -> bytes:
        buffer = io.BytesIO()
        self.static().savefig(buffer, format="png", dpi=dpi)
        return buffer.getvalue()

    def _repr_mimebundle_(self, **kwargs):
        data, metadata = super()._repr_mimebundle_(**kwargs)
        png = self.png()
        data["image/png"] = base64.b64encode(png).decode()
        if len(self._data) <= INLINE_HTML_LIMIT:  # nbconvert shows it where no widget state is saved
            data["text/html"] = self.to_html(standalone=False, fallback_png=png)
        return data, metadata

    def to_html(self, standalone: bool = True, fallback_png: bytes | None = None) -> str:
        """The explorer as HTML that runs offline: a whole page, or a fragment for an output.

        The fragment shows ``fallback_png`` until its script replaces it with the explorer.
        """
        uid = f"ax-{uuid.uuid4().hex[:12]}"
        state = {"_meta": self._meta, "view": self.view, "kind": self.kind, "layer": self.layer,
                 "head": self.head, "query": self.query}
        js, css, boot = ((HERE / name).read_text() for name in ASSETS)
        image = "" if fallback_png is None else (
            f'<img class="ax-fallback" alt="attention explorer (static picture)" '
            f'src="data:image/png;base64,{base64.b64encode(fallback_png).decode()}">')
        data = base64.b64encode(self._data).decode()
        body = (f'<style>{css}</style>\n<div id="{uid}">{image}</div>\n'
                f'<script type="application/json" id="{uid}-state">{_script_text(json.dumps(state))}'
                '</script>\n'
                f'<script type="text/plain" id="{uid}-data">{data}</script>\n'
                f'<script type="text/plain" id="{uid}-module">{_script_text(js)}</script>\n'
                f'<script type="module">{_script_text(boot.replace("__ID__", uid))}</script>\n')
        if not standalone:
            return body
        return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
                '<title>Attention explorer</title>\n</head>\n<body>\n' + body + '</body>\n</html>\n')

    def save_html(self, path) -> Path:
        """Write a self-contained page (the data, the script, the style; no network needed)."""
        path = Path(path)
        path.write_text(self.to_html(), encoding="utf-8")
        return path
