// The attention explorer in the browser, in anywidget's module format (`export default
// { render }`): no imports, nothing fetched. widget.py sends `_meta` (JSON: for every kind of
// attention its sizes, tokens and byte offsets) and `_data` (one buffer: weights as uint8 =
// round(255 a), masks as uint8, queries and keys as float16), and keeps the selection in the
// traits view, kind, layer, head (-1: all heads) and query. Each view draws on one canvas; a
// click sets the traits and redraws at once, and the kernel hears of it afterwards
// (save_changes), so no click waits for Python. Each picture is laid out for the width the
// explorer has (and drawn again when it changes), its text at a fixed size. The root's data-*
// attributes report the state, that width and the redraw times; the browser tests and
// benchmarks/explorer_latency.py read them.

const VIEWS = [["head", "head view"], ["model", "model view"], ["qk", "query–key view"]];
const MASKED = "#b0b0b0"; // as course_lib.viz.MASKED_COLOR: not allowed to attend
const ACCENT = "#d62728"; // the selected query, layer and head
const BLUE = [31, 95, 191]; // one head's lines and token shading
const HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
  "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
  "#7b4173", "#3182bd"];
const VIRIDIS = [[68, 1, 84], [71, 39, 119], [62, 73, 137], [48, 103, 141], [37, 130, 142],
  [30, 157, 136], [53, 183, 120], [109, 206, 88], [181, 221, 43], [253, 231, 36]];

const clamp = (x, lo, hi) => Math.max(lo, Math.min(hi, x));
const range = (n) => Array.from({ length: n }, (_, i) => i);

function colourTable(stops) { // 256 RGB triples, linear between evenly spaced stops
  const table = new Uint8ClampedArray(256 * 3);
  for (let v = 0; v < 256; v++) {
    const x = (v / 255) * (stops.length - 1), i = Math.min(Math.floor(x), stops.length - 2);
    for (let c = 0; c < 3; c++) table[3 * v + c] = stops[i][c] + (x - i) * (stops[i + 1][c] - stops[i][c]);
  }
  return table;
}
const VIRIDIS_TABLE = colourTable(VIRIDIS);

let HALF = null; // float16 bit pattern -> value, built on first use
function halfTable() {
  const table = new Float32Array(65536);
  for (let bits = 0; bits < 65536; bits++) {
    const sign = bits & 0x8000 ? -1 : 1, e = (bits >> 10) & 31, f = bits & 1023;
    table[bits] = e === 0 ? sign * f * 2 ** -24
      : e === 31 ? (f ? NaN : sign * Infinity) : sign * (1 + f / 1024) * 2 ** (e - 15);
  }
  return table;
}

function floats(bytes, offset, count) { // little-endian float16 -> Float32Array
  HALF ??= halfTable();
  const start = bytes.byteOffset + offset; // copied: the view may be oddly aligned
  const bits = new Uint16Array(bytes.buffer.slice(start, start + 2 * count));
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = HALF[bits[i]];
  return out;
}

function unpack(meta, data) { // one "pane" per kind of attention
  const bytes = data instanceof ArrayBuffer ? new Uint8Array(data)
    : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return meta.kinds.map((kind) => {
    const { n_layers: L, n_heads: H, T_q, T_k, d_k, offsets: o } = kind;
    return {
      ...kind,
      weights: bytes.subarray(o.weights, o.weights + L * H * T_q * T_k), // (L, H, T_q, T_k)
      mask: o.mask < 0 ? null : bytes.subarray(o.mask, o.mask + T_q * T_k), // (T_q, T_k)
      q: o.q < 0 ? null : floats(bytes, o.q, L * H * T_q * d_k), // (L, H, T_q, d_k)
      k: o.k < 0 ? null : floats(bytes, o.k, L * H * T_k * d_k), // (L, H, T_k, d_k)
    };
  });
}

function node(tag, cls, parent, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

function resize(canvas, width, height) { // sets the size (which clears) and returns the context
  const r = window.devicePixelRatio || 1;
  canvas.width = Math.ceil(width * r);
  canvas.height = Math.ceil(height * r);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(r, 0, 0, r, 0, 0);
  return ctx;
}

const MEASURE = document.createElement("canvas").getContext("2d");
function labels(tokens, font, maxWidth) { // tokens cut to fit, and the width they need
  MEASURE.font = font;
  const fit = tokens.map((t) => {
    if (MEASURE.measureText(t).width <= maxWidth) return t;
    let s = t;
    while (s.length > 1 && MEASURE.measureText(s + "…").width > maxWidth) s = s.slice(0, -1);
    return s + "…";
  });
  return { fit, width: Math.ceil(Math.max(24, ...fit.map((t) => MEASURE.measureText(t).width))) };
}

const at = (p, layer, head) => (layer * p.n_heads + head) * p.T_q * p.T_k; // start of one map
const allowed = (p, i, j) => !p.mask || p.mask[i * p.T_k + j] > 0;

// ------------------------------------------------------------------------------ head view
function headLayout(p, room) {
  // The tokens keep their size; the lines between them narrow to fit the room (to 120 px).
  const T = Math.max(p.T_q, p.T_k);
  const row = T <= 24 ? 22 : T <= 64 ? 16 : T <= 200 ? 12 : 11; // text of 9 px at the least
  const font = `${Math.min(13, row - 2)}px sans-serif`;
  const [q, k] = (p.headLabels ??= [labels(p.query_tokens, font, 150), labels(p.key_tokens, font, 150)]);
  const xq = 12 + Math.max(q.width, 48), x1 = xq + 8, right = 8 + Math.max(k.width, 40) + 12;
  const x2 = x1 + clamp(room - x1 - right, 120, T > 64 ? 280 : 200), xk = x2 + 8;
  return { row, font, q: q.fit, k: k.fit, xq, x1, x2, xk, top: 30, width: x2 + right, height: 30 + T * row + 8 };
}

const LINE_BUDGET = 5000; // rasterising a line costs ~20 µs: at most ~0.1 s per picture

function strokeLines(ctx, p, s, lay, heads, only) {
  // Lines from query i (left) to key j (right), opacity = weight, batched into 16 opacity
  // levels so that 512 x 512 candidate lines cost 16 strokes per head. Only the strongest
  // LINE_BUDGET lines are drawn (the rest are fainter than weight `least`, near invisible).
  // While a token is hovered (only = {side, index}) just its lines, scaled so that its
  // strongest is opaque. Returns {drawn, least}.
  const { T_q: Tq, T_k: Tk } = p, W = p.weights, y = (i) => lay.top + (i + 0.5) * lay.row;
  const i0 = only?.side === "q" ? only.index : 0, i1 = only?.side === "q" ? i0 + 1 : Tq;
  const j0 = only?.side === "k" ? only.index : 0, j1 = only?.side === "k" ? j0 + 1 : Tk;
  let scale = 1, least = 3;
  if (only) {
    let max = 0;
    for (const h of heads) for (let i = i0; i < i1; i++) for (let j = j0; j < j1; j++) max = Math.max(max, W[at(p, s.layer, h) + i * Tk + j]);
    scale = max > 0 ? 255 / max : 1;
  } else {
    const counts = new Int32Array(256);
    for (const h of heads) {
      const map = W.subarray(at(p, s.layer, h), at(p, s.layer, h + 1));
      for (let n = 0; n < map.length; n++) counts[map[n]]++;
    }
    let kept = 0;
    for (let v = 255; v >= 3 && kept + counts[v] <= LINE_BUDGET; v--) {
      kept += counts[v];
      least = v;
    }
  }
  let drawn = 0;
  ctx.lineWidth = only ? 1.6 : 1;
  for (const h of heads) {
    const buckets = range(16).map(() => []), base = at(p, s.layer, h);
    for (let i = i0; i < i1; i++) {
      for (let j = j0; j < j1; j++) {
        const v = Math.min(255, W[base + i * Tk + j] * scale);
        if (v >= least) buckets[v >> 4].push(i, j);
      }
    }
    ctx.strokeStyle = heads.length > 1 ? HEAD_COLOURS[h % HEAD_COLOURS.length] : `rgb(${BLUE})`;
    buckets.forEach((pairs, b) => {
      if (!pairs.length) return;
      drawn += pairs.length / 2;
      ctx.globalAlpha = (((b << 4) + 8) / 255) * (heads.length > 1 ? 0.8 : 1);
      ctx.beginPath();
      for (let n = 0; n < pairs.length; n += 2) {
        ctx.moveTo(lay.x1, y(pairs[n]));
        ctx.lineTo(lay.x2, y(pairs[n + 1]));
      }
      ctx.stroke();
    });
  }
  ctx.globalAlpha = 1;
  return { drawn, least: least / 255 };
}

function shading(p, s, heads, hover) { // the other side's weights for the hovered token
  const n = hover.side === "q" ? p.T_k : p.T_q, out = new Float32Array(n);
  for (const h of heads) {
    const base = at(p, s.layer, h);
    for (let x = 0; x < n; x++) {
      out[x] += (hover.side === "q" ? p.weights[base + hover.index * p.T_k + x]
        : p.weights[base + x * p.T_k + hover.index]) / 255 / heads.length;
    }
  }
  return out;
}

function drawHead(canvas, s, hover) {
  const p = s.pane, lay = headLayout(p, s.room), ctx = resize(canvas, lay.width, lay.height);
  const heads = s.head < 0 ? range(p.n_heads) : [s.head], y = (i) => lay.top + (i + 0.5) * lay.row;
  ctx.font = lay.font;
  ctx.textBaseline = "middle";
  ctx.fillStyle = "#555";
  ctx.textAlign = "right";
  ctx.fillText("queries", lay.xq, 12);
  ctx.textAlign = "left";
  ctx.fillText("keys", lay.xk, 12);
  if (heads.length > 1) { // which colour is which head
    const step = (lay.x2 - lay.x1) / heads.length;
    ctx.textAlign = "center";
    heads.forEach((h) => {
      ctx.fillStyle = HEAD_COLOURS[h % HEAD_COLOURS.length];
      ctx.fillText(`${h}`, lay.x1 + (h + 0.5) * step, 12);
    });
  }
  const weights = hover ? shading(p, s, heads, hover) : null;
  const top = weights ? Math.max(...weights) || 1 : 1;
  const masked = (side, x) => hover && hover.side !== side
    && !(side === "k" ? allowed(p, hover.index, x) : allowed(p, x, hover.index));
  for (const [side, tokens, x0, x1] of [["q", lay.q, 8, lay.xq + 4], ["k", lay.k, lay.xk - 4, lay.width - 8]]) {
    tokens.forEach((_, x) => {
      const box = [x0, lay.top + x * lay.row + 1, x1 - x0, lay.row - 2];
      if (masked(side, x)) {
        ctx.fillStyle = MASKED;
        ctx.fillRect(...box);
      } else if (weights && hover.side !== side) {
        ctx.fillStyle = `rgba(${BLUE},${(0.85 * weights[x]) / top})`;
        ctx.fillRect(...box);
      }
      if (hover?.side === side && hover.index === x) {
        ctx.strokeStyle = "#000";
        ctx.strokeRect(...box);
      }
    });
  }
  const lines = strokeLines(ctx, p, s, lay, heads, hover);
  ctx.strokeStyle = ACCENT;
  ctx.lineWidth = 2;
  ctx.strokeRect(7, lay.top + s.query * lay.row, lay.xq - 1, lay.row);
  for (const [side, tokens, x] of [["q", lay.q, lay.xq], ["k", lay.k, lay.xk]]) {
    ctx.textAlign = side === "q" ? "right" : "left";
    tokens.forEach((t, i) => {
      ctx.fillStyle = masked(side, i) ? "#666" : weights && hover.side !== side && weights[i] / top > 0.6 ? "#fff" : "#222";
      ctx.fillText(t, x, y(i));
    });
  }
  let text = heads.length > 1 ? "all heads, one colour each; " : "";
  text += "a line joins a query (left) to a key (right); its opacity is the attention weight"
    + (lines.least > 0.015 ? ` (the ${lines.drawn} strongest lines, weight ≥ ${lines.least.toFixed(2)})` : "")
    + ". Hover a token; click a query to select it.";
  if (hover) {
    const own = hover.side === "q" ? p.query_tokens : p.key_tokens;
    const other = hover.side === "q" ? p.key_tokens : p.query_tokens;
    const best = range(weights.length).filter((x) => !masked(hover.side === "q" ? "k" : "q", x))
      .sort((a, b) => weights[b] - weights[a]).slice(0, 4).map((x) => `“${other[x]}” ${weights[x].toFixed(2)}`);
    text = hover.side === "q" ? `query “${own[hover.index]}” (${hover.index}) attends most to ${best.join(", ")}`
      : `key “${own[hover.index]}” (${hover.index}) gets the most from ${best.join(", ")}`;
    text += heads.length > 1 ? " (mean over the heads)" : "";
  }
  return { layout: { top: lay.top, row: lay.row, x1: lay.x1, x2: lay.x2, width: lay.width }, text, hit: (x, yy) => {
    const i = Math.floor((yy - lay.top) / lay.row);
    if (x < lay.x1 && i >= 0 && i < p.T_q) return { side: "q", index: i };
    if (x > lay.x2 && i >= 0 && i < p.T_k) return { side: "k", index: i };
    return null;
  } };
}

// ----------------------------------------------------------------------------- model view
function modelLayout(p, room) {
  // Tiles of 24 to 110 px: smaller with more heads, and as small as the room asks.
  const step = Math.min(Math.floor(880 / Math.max(p.n_heads, 4)), Math.floor((room - 64) / p.n_heads));
  const tile = clamp(step - 8, 24, 110);
  MEASURE.font = "12px sans-serif"; // "head 11" over each column where it fits, else "11"
  const named = MEASURE.measureText(`head ${p.n_heads - 1}`).width + 6 <= tile + 8;
  return { tile, step: tile + 8, left: 64, top: 24, named,
    width: 64 + p.n_heads * (tile + 8), height: 24 + p.n_layers * (tile + 8) };
}

function makeTiles(p, tile) {
  // One small heatmap per (layer, head): the largest weight of each block of cells (so a
  // sharp head stays visible at 512 tokens), viridis; grey where every cell is masked.
  const n = Math.min(p.T_q, tile), m = Math.min(p.T_k, tile), Tk = p.T_k;
  const rowOf = range(p.T_q).map((i) => Math.floor((i * n) / p.T_q));
  const colOf = Int32Array.from(range(Tk), (j) => Math.floor((j * m) / Tk));
  let open = null; // cells a query may attend to, per block
  if (p.mask) {
    open = new Int32Array(n * m);
    for (let i = 0; i < p.T_q; i++) for (let j = 0; j < Tk; j++) open[rowOf[i] * m + colOf[j]] += p.mask[i * Tk + j] > 0;
  }
  const acc = new Uint8Array(n * m), tiles = [];
  for (let l = 0; l < p.n_layers; l++) {
    for (let h = 0; h < p.n_heads; h++) {
      acc.fill(0);
      const base = at(p, l, h);
      for (let i = 0; i < p.T_q; i++) {
        const r = rowOf[i] * m, off = base + i * Tk;
        for (let j = 0; j < Tk; j++) {
          const v = p.weights[off + j], c = r + colOf[j];
          if (v > acc[c]) acc[c] = v;
        }
      }
      const canvas = document.createElement("canvas");
      canvas.width = m;
      canvas.height = n;
      const ctx = canvas.getContext("2d"), image = ctx.createImageData(m, n);
      for (let c = 0; c < n * m; c++) {
        const grey = open && !open[c];
        for (let k = 0; k < 3; k++) image.data[4 * c + k] = grey ? 176 : VIRIDIS_TABLE[3 * acc[c] + k];
        image.data[4 * c + 3] = 255;
      }
      ctx.putImageData(image, 0, 0);
      tiles.push(canvas);
    }
  }
  return tiles;
}

function drawModel(canvas, s, hover) {
  const p = s.pane, lay = modelLayout(p, s.room), ctx = resize(canvas, lay.width, lay.height);
  const size = Math.min(lay.tile, Math.max(p.T_q, p.T_k)); // the tiles' pixels: made again when it changes
  if (p.tileSize !== size) [p.tiles, p.tileSize] = [makeTiles(p, lay.tile), size];
  ctx.imageSmoothingEnabled = false;
  ctx.font = "12px sans-serif";
  ctx.fillStyle = "#333";
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  for (let h = 0; h < p.n_heads; h++) {
    ctx.fillText(lay.named ? `head ${h}` : `${h}`, lay.left + h * lay.step + lay.tile / 2, 11);
  }
  ctx.textAlign = "right";
  if (!lay.named) ctx.fillText("head", lay.left - 8, 11);
  for (let l = 0; l < p.n_layers; l++) ctx.fillText(`layer ${l + 1}`, lay.left - 8, lay.top + l * lay.step + lay.tile / 2);
  for (let l = 0; l < p.n_layers; l++) {
    for (let h = 0; h < p.n_heads; h++) {
      ctx.drawImage(p.tiles[l * p.n_heads + h], lay.left + h * lay.step, lay.top + l * lay.step, lay.tile, lay.tile);
    }
  }
  const frame = (l, h, colour, width) => {
    ctx.strokeStyle = colour;
    ctx.lineWidth = width;
    ctx.strokeRect(lay.left + h * lay.step - 2, lay.top + l * lay.step - 2, lay.tile + 4, lay.tile + 4);
  };
  for (const h of s.head < 0 ? range(p.n_heads) : [s.head]) frame(s.layer, h, ACCENT, 3);
  if (hover) frame(hover.layer, hover.head, "#000", 2);
  const text = hover ? `layer ${hover.layer + 1}, head ${hover.head}: click to open it in the head view`
    : "one heatmap per layer (rows) and head (columns): query rows, key columns, brightest = largest weight"
      + (p.mask ? ", grey = masked" : "") + ". Click one to open it in the head view.";
  return { layout: { left: lay.left, top: lay.top, step: lay.step, tile: lay.tile }, text, hit: (x, y) => {
    const h = Math.floor((x - lay.left) / lay.step), l = Math.floor((y - lay.top) / lay.step);
    const inside = (x - lay.left) % lay.step < lay.tile && (y - lay.top) % lay.step < lay.tile;
    return h >= 0 && h < p.n_heads && l >= 0 && l < p.n_layers && inside ? { layer: l, head: h } : null;
  } };
}

// ------------------------------------------------------------------------- query–key view
function cellsImage(values, rows, cols, maxAbs) { // one pixel per value, red > 0 > blue
  const canvas = document.createElement("canvas");
  canvas.width = cols;
  canvas.height = rows;
  const ctx = canvas.getContext("2d"), image = ctx.createImageData(cols, rows);
  for (let c = 0; c < rows * cols; c++) {
    const t = clamp(values[c] / (maxAbs || 1), -1, 1), to = t > 0 ? [214, 39, 40] : [31, 119, 180];
    for (let k = 0; k < 3; k++) image.data[4 * c + k] = 255 + Math.abs(t) * (to[k] - 255);
    image.data[4 * c + 3] = 255;
  }
  ctx.putImageData(image, 0, 0);
  return canvas;
}

const quoted = (t) => `q: “${t}”`; // the query's label, left of its vector

function qkLayout(p, room) {
  // The text keeps its size; to fit the room the vectors' cells narrow (to 2 px a dimension),
  // then the bars (to 80 px). Wider than the room only where even that does not fit.
  const d = p.d_k, Tk = p.T_k, row = Tk <= 40 ? 18 : Tk <= 128 ? 13 : 11;
  const font = `${Math.min(12, row - 2)}px sans-serif`;
  const names = (p.keyLabels ??= labels(p.key_tokens, font, 120));
  const queries = (p.queryLabels ??= labels(p.query_tokens, font, 120));
  MEASURE.font = font;
  const titles = [`k_j (key vectors, d_k = ${d})`, "q ⊙ k_j (elementwise)", "s_j = Σ (q ⊙ k_j) / √d_k", "a_j = softmax(s)_j"];
  const column = (title, drawn) => Math.max(drawn, Math.ceil(MEASURE.measureText(title).width) + 12); // column + gap
  // the key names and the query's label end 6 px left of the vectors: room for the wider
  const xK = 14 + Math.max(names.width, Math.ceil(MEASURE.measureText(quoted("")).width) + queries.width);
  const sized = (cell, bar) => {
    const xP = xK + column(titles[0], d * cell + 24), xS = xP + column(titles[1], d * cell + 24);
    const xA = xS + column(titles[2], bar + 56);
    return { cell, bar, block: d * cell, xP, xS, xA, width: xA + bar + 48 };
  };
  let lay = sized(clamp(Math.floor(256 / d), 2, 14), 130);
  while (lay.width > room && lay.cell > 2) lay = sized(lay.cell - 1, lay.bar);
  while (lay.width > room && lay.bar > 80) lay = sized(lay.cell, lay.bar - 2);
  const top = 40 + row;
  return { ...lay, row, font, names, queries, titles, xK, top, height: top + Tk * row + 8 };
}

function drawQK(canvas, s, hover) {
  const p = s.pane;
  if (!p.q) {
    const ctx = resize(canvas, 640, 60);
    ctx.font = "13px sans-serif";
    ctx.fillStyle = "#333";
    ctx.fillText("This view needs the queries and keys, not only the weights: the explorer of a", 10, 22);
    ctx.fillText("course model (explore(model, ...)) has them, or pass q= and k= with the arrays.", 10, 42);
    return { layout: {}, text: "no queries and keys for this attention", hit: () => null };
  }
  const lay = qkLayout(p, s.room), { d_k: d, T_k: Tk } = p, h = Math.max(0, s.head), i = s.query;
  const { row, font, names, queries, titles, block, bar, top, xK, xP, xS, xA } = lay;
  const ctx = resize(canvas, lay.width, lay.height);
  const q = p.q.subarray(((s.layer * p.n_heads + h) * p.T_q + i) * d, ((s.layer * p.n_heads + h) * p.T_q + i + 1) * d);
  const k = p.k.subarray((s.layer * p.n_heads + h) * Tk * d, (s.layer * p.n_heads + h + 1) * Tk * d);
  const prod = new Float32Array(Tk * d), score = new Float64Array(Tk);
  let maxK = 0, maxP = 0, maxS = 0, best = -Infinity;
  for (let j = 0; j < Tk; j++) {
    let sum = 0;
    for (let c = 0; c < d; c++) {
      const v = q[c] * k[j * d + c];
      prod[j * d + c] = v;
      sum += v;
      maxK = Math.max(maxK, Math.abs(k[j * d + c]));
      maxP = Math.max(maxP, Math.abs(v));
    }
    score[j] = allowed(p, i, j) ? sum / Math.sqrt(d) : -Infinity;
    if (score[j] > best) best = score[j];
    if (Number.isFinite(score[j])) maxS = Math.max(maxS, Math.abs(score[j]));
  }
  const weight = score.map((v) => Math.exp(v - best)), total = weight.reduce((a, b) => a + b, 0);
  weight.forEach((v, j) => { weight[j] = v / total; });
  ctx.font = font;
  ctx.textBaseline = "middle";
  ctx.fillStyle = "#333";
  [xK, xP, xS, xA].forEach((x, n) => ctx.fillText(titles[n], x, 10));
  ctx.textAlign = "right";
  ctx.fillText(quoted(queries.fit[i]), xK - 6, 30);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(cellsImage(q, 1, d, Math.max(...q.map(Math.abs))), xK, 30 - row / 2, block, row);
  ctx.drawImage(cellsImage(k, Tk, d, maxK), xK, top, block, Tk * row);
  ctx.drawImage(cellsImage(prod, Tk, d, maxP), xP, top, block, Tk * row);
  const mid = xS + bar / 2;
  for (let j = 0; j < Tk; j++) {
    const y = top + j * row, open = Number.isFinite(score[j]);
    ctx.textAlign = "right";
    ctx.fillStyle = open ? "#222" : "#888";
    ctx.fillText(names.fit[j], xK - 6, y + row / 2);
    if (!open) {
      ctx.fillStyle = MASKED;
      ctx.fillRect(xP, y, block, row - 1);
      ctx.fillRect(xS, y + 1, bar, row - 2);
    } else {
      const w = ((bar / 2) * score[j]) / (maxS || 1);
      ctx.fillStyle = w >= 0 ? "#d62728" : "#1f77b4";
      ctx.fillRect(Math.min(mid, mid + w), y + 2, Math.abs(w), row - 4);
    }
    ctx.fillStyle = `rgb(${BLUE})`;
    ctx.fillRect(xA, y + 2, bar * weight[j], row - 4);
    const stored = p.weights[at(p, s.layer, h) + i * Tk + j] / 255; // the model's own weight
    ctx.fillStyle = "#000";
    ctx.fillRect(xA + bar * stored - 1, y + 1, 2, row - 2);
    if (row >= 13) {
      ctx.textAlign = "left";
      ctx.fillStyle = "#333";
      ctx.fillText(open ? score[j].toFixed(2) : "−∞", xS + bar + 4, y + row / 2);
      ctx.fillText(weight[j].toFixed(2), xA + bar + 4, y + row / 2);
    }
    if (hover?.index === j) {
      ctx.strokeStyle = "#000";
      ctx.strokeRect(4, y, xA + bar + 40, row);
    }
  }
  ctx.strokeStyle = "#999";
  ctx.beginPath();
  ctx.moveTo(mid, top);
  ctx.lineTo(mid, top + Tk * row);
  ctx.stroke();
  let text = `layer ${s.layer + 1}, head ${h}${s.head < 0 ? " (pick a head: this view shows one)" : ""}, `
    + `query “${p.query_tokens[i]}” (${i}): products, their sums s_j, then the softmax over the keys; `
    + (p.mask ? "masked keys (grey) score −∞; " : "") + "the black tick is the weight the model computed.";
  if (hover) {
    const j = hover.index;
    text = `key “${p.key_tokens[j]}” (${j}): q·k = ${(score[j] * Math.sqrt(d)).toFixed(3)}, `
      + `s = q·k / √${d} = ${score[j].toFixed(3)}, weight ${weight[j].toFixed(3)}`;
  }
  return { layout: { top, row }, text, hit: (x, y) => {
    const j = Math.floor((y - top) / row);
    return j >= 0 && j < Tk ? { side: "k", index: j } : null;
  } };
}

// ---------------------------------------------------------------------------------- widget
function render({ model, el }) {
  const panes = unpack(model.get("_meta"), model.get("_data"));
  const byName = Object.fromEntries(panes.map((p) => [p.name, p]));
  const root = node("div", "ax-root", el);
  const bar = node("div", "ax-bar", root);
  const views = VIEWS.map(([view, label]) => Object.assign(node("button", "ax-button", bar, label), { value: view }));
  const kinds = panes.length > 1 ? panes.map((p) => Object.assign(node("button", "ax-button ax-kind", bar, p.title), { value: p.name })) : [];
  const select = (name) => {
    const box = node("label", "ax-select", bar, name);
    return node("select", `ax-${name}`, box);
  };
  const layerSelect = select("layer"), headSelect = select("head"), querySelect = select("query");
  const stage = node("div", "ax-stage", root);
  const canvas = node("canvas", "ax-canvas", stage);
  const note = node("div", "ax-note", root);
  let hover = null, shown = null, clickedAt = null, pending = false, draws = 0;

  // The pictures are drawn for the width the root has (JupyterLab's output area, a page): its
  // width less the stage's border and, once one has shown, the stage's vertical scroll bar
  // (kept then, or a picture that fits only without the bar would flip between two widths).
  // Until the root is laid out the width is unknown and the pictures take their full size.
  let width = 0, edge = 0;
  const measure = () => { // whether the room changed; a hidden root (width 0) keeps the last
    const seen = root.clientWidth, border = Math.max(edge, stage.offsetWidth - stage.clientWidth);
    if (seen === 0 || (seen === width && border === edge)) return false;
    [width, edge] = [seen, border];
    return true;
  };
  measure();
  const resized = new ResizeObserver(() => { if (measure()) redraw(); });
  resized.observe(root);
  resized.observe(stage); // its scroll bar comes and goes with the picture's height

  const state = () => {
    const pane = byName[model.get("kind")] || panes[0];
    return { pane, view: model.get("view"), layer: clamp(model.get("layer"), 0, pane.n_layers - 1),
      head: clamp(model.get("head"), -1, pane.n_heads - 1), query: clamp(model.get("query"), 0, pane.T_q - 1),
      room: width > 0 ? width - edge : Infinity };
  };

  const options = (box, key, entries) => {
    if (box.dataset.key === key) return;
    box.replaceChildren(...entries.map(([value, label]) => Object.assign(document.createElement("option"), { value, textContent: label })));
    box.dataset.key = key;
  };

  function controls(s) {
    for (const b of views) b.classList.toggle("ax-active", b.value === s.view);
    for (const b of kinds) b.classList.toggle("ax-active", b.value === s.pane.name);
    const p = s.pane;
    options(layerSelect, p.name, range(p.n_layers).map((l) => [l, `${l + 1} of ${p.n_layers}`]));
    options(headSelect, p.name, [[-1, "all"], ...range(p.n_heads).map((h) => [h, `${h}`])]);
    options(querySelect, p.name, p.query_tokens.map((t, i) => [i, `${i}: ${t}`]));
    layerSelect.value = s.layer;
    headSelect.value = s.head;
    querySelect.value = s.query;
  }

  function draw() {
    pending = false;
    const start = performance.now(), s = state();
    const key = `${s.view}|${s.pane.name}|${s.layer}|${s.head}|${s.query}`;
    if (shown !== key) hover = null; // a hovered token belongs to the picture it was in
    shown = key;
    controls(s);
    const drawn = (s.view === "model" ? drawModel : s.view === "qk" ? drawQK : drawHead)(canvas, s, hover);
    canvas.hit = drawn.hit;
    note.textContent = `${s.pane.title}: ${drawn.text}`;
    const end = performance.now();
    Object.assign(root.dataset, { view: s.view, kind: s.pane.name, layer: s.layer, head: s.head,
      query: s.query, hover: hover ? JSON.stringify(hover) : "", layout: JSON.stringify(drawn.layout), width,
      draws: ++draws, drawMs: (end - start).toFixed(1) });
    if (clickedAt !== null) { // click-to-redraw: from the event to the end of drawing, and to the next frame
      const t0 = clickedAt;
      clickedAt = null;
      root.dataset.latencyMs = (end - t0).toFixed(1);
      requestAnimationFrame(() => setTimeout(() => { root.dataset.frameMs = (performance.now() - t0).toFixed(1); }, 0));
    }
  }
  const redraw = () => {
    if (!pending) {
      pending = true;
      queueMicrotask(draw);
    }
  };

  function choose(changes, event) {
    clickedAt = event ? event.timeStamp : performance.now();
    if (changes.kind !== undefined) { // keep the selection inside the new kind's sizes
      const p = byName[changes.kind];
      changes.layer = clamp(model.get("layer"), 0, p.n_layers - 1);
      changes.head = clamp(model.get("head"), -1, p.n_heads - 1);
      changes.query = clamp(model.get("query"), 0, p.T_q - 1);
    }
    for (const [key, value] of Object.entries(changes)) model.set(key, value);
    model.save_changes();
    redraw();
  }

  for (const b of views) b.addEventListener("click", (e) => choose({ view: b.value }, e));
  for (const b of kinds) b.addEventListener("click", (e) => choose({ kind: b.value }, e));
  layerSelect.addEventListener("change", (e) => choose({ layer: +layerSelect.value }, e));
  headSelect.addEventListener("change", (e) => choose({ head: +headSelect.value }, e));
  querySelect.addEventListener("change", (e) => choose({ query: +querySelect.value }, e));
  const where = (e) => {
    const box = canvas.getBoundingClientRect();
    return canvas.hit ? canvas.hit(e.clientX - box.left, e.clientY - box.top) : null;
  };
  canvas.addEventListener("mousemove", (e) => {
    const hit = where(e);
    if (JSON.stringify(hit) !== JSON.stringify(hover)) {
      hover = hit;
      redraw();
    }
  });
  canvas.addEventListener("mouseleave", () => {
    if (hover) {
      hover = null;
      redraw();
    }
  });
  canvas.addEventListener("click", (e) => {
    const hit = where(e), view = model.get("view");
    if (hit && view === "model") choose({ layer: hit.layer, head: hit.head, view: "head" }, e);
    else if (hit && view === "head" && hit.side === "q") choose({ query: hit.index }, e);
  });
  const traits = ["view", "kind", "layer", "head", "query"];
  for (const t of traits) model.on(`change:${t}`, redraw);
  draw();
  return () => {
    for (const t of traits) model.off(`change:${t}`, redraw);
    resized.disconnect();
  };
}

export default { render };
