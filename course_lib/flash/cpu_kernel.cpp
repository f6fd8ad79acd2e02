// FlashAttention forward and hand-derived backward for the CPU, compiled (notebook 07, issue 21).
//
// The algorithm of course_lib/flash/cpu.py (read reference.py's docstring for the derivation),
// with the element-wise steps of each tile (row maximum, exp, rescale, row sums, the causal cut)
// done in plain loops on the tile while it is still in cache, instead of one torch op each.
// Tile products go to a small hand-written GEMM (see "tile products" below for why not MKL).
// Every B of a tile product is read from panels (NR columns side by side, zero-padded): the
// forward cuts K^T's and V's key tiles into panels once per call, the backward a key block's
// K_j^T and V_j^T once per block, the rest is cut as each product needs it.
// The causal cut is computed per row (how many keys of the tile a query sees), so no -inf is
// ever written or exponentiated; key tiles wholly in a query block's future are never visited,
// and the backward trims each tile's key columns to the last one its query block sees.
//
// Shapes (course glossary, row form), all float32 and contiguous, N = product of leading axes:
//   q (N, T_q, d_k), k (N, T_k, d_k), v (N, T_k, d_v), out (N, T_q, d_v), lse (N, T_q),
//   dout (N, T_q, d_v); dq, dk, dv as q, k, v.
// causal: query i sits at position i + T_k - T_q and sees keys 0 .. that position. A query
// with no visible key gets out = 0, lse = -inf and zero gradients.
//
// Parallel with at::parallel_for (PyTorch's intra-op pool: torch.set_num_threads governs it):
// the forward over (N, query blocks); the backward over (N, key blocks): a key block's dk, dv
// rows have one writer, and every thread but the first adds its dq into a copy of its own
// (summed at the end), so no two threads ever add into the same gradient row. Work items are
// handed out one by one, largest first, to whichever thread is free.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

// ----------------------------------------------------------------------------- tile products
// A hand-written GEMM rather than the BLAS PyTorch links: MKL called from inside PyTorch's
// OpenMP threads opened nested parallel regions on every tile, and on this shared 2-core machine
// the threads spent more time waiting on each other than multiplying (libgomp led the profile).
// GCC's vector extensions: 8 floats a register, AVX2 + FMA with -march=native.
typedef float v8 __attribute__((vector_size(32), aligned(4)));
constexpr int MR = 6, NR = 16;  // a 6 x 16 block of C lives in 12 registers

// A matrix read through strides: element (i, j) at p[i * rs + j * cs] (a transpose is free).
struct Strided {
  const float* p;
  int64_t rs, cs;
};

// C[0:mr, 0:nr] (ldc) = alpha * A[0:mr, 0:K] B + beta * C, B a packed K x NR panel (zero past nr).
template <int R>
void micro_kernel(int K, const Strided& A, const float* panel, float alpha, float beta, float* c,
                  int ldc, int nr) {
  v8 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = v8{};
  for (int kk = 0; kk < K; ++kk) {
    const v8 b0 = *reinterpret_cast<const v8*>(panel + kk * NR);
    const v8 b1 = *reinterpret_cast<const v8*>(panel + kk * NR + 8);
    const float* a = A.p + kk * A.cs;
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const float ar = a[r * A.rs];
      acc[r][0] += ar * b0;
      acc[r][1] += ar * b1;
    }
  }
  if (nr == NR) {  // a whole block: from the registers to C, one vector a half row
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      v8* cr = reinterpret_cast<v8*>(c + r * ldc);  // v8 is aligned(4): any float address
      if (beta == 0.f) {
        cr[0] = alpha * acc[r][0];
        cr[1] = alpha * acc[r][1];
      } else {
        cr[0] += alpha * acc[r][0];
        cr[1] += alpha * acc[r][1];
      }
    }
    return;
  }
  for (int r = 0; r < R; ++r) {  // the last columns of C: nr of the NR
    float row[NR];
    std::memcpy(row, acc[r], sizeof row);
    float* cr = c + r * ldc;
    if (beta == 0.f)
      for (int j = 0; j < nr; ++j) cr[j] = alpha * row[j];
    else
      for (int j = 0; j < nr; ++j) cr[j] += alpha * row[j];
  }
}

// C[0:M, 0:nr] (ldc) = alpha * A B + beta * C for one K x NR panel B: every block of MR rows of A.
void multiply_panel(int M, int K, float alpha, const Strided& A, const float* panel, float beta,
                    float* C, int ldc, int nr) {
  for (int i0 = 0; i0 < M; i0 += MR) {
    const Strided a{A.p + i0 * A.rs, A.rs, A.cs};
    float* c = C + i0 * ldc;
    switch (std::min(MR, M - i0)) {
      case 6: micro_kernel<6>(K, a, panel, alpha, beta, c, ldc, nr); break;
      case 5: micro_kernel<5>(K, a, panel, alpha, beta, c, ldc, nr); break;
      case 4: micro_kernel<4>(K, a, panel, alpha, beta, c, ldc, nr); break;
      case 3: micro_kernel<3>(K, a, panel, alpha, beta, c, ldc, nr); break;
      case 2: micro_kernel<2>(K, a, panel, alpha, beta, c, ldc, nr); break;
      default: micro_kernel<1>(K, a, panel, alpha, beta, c, ldc, nr);
    }
  }
}

// C (M x N, row-major, ldc) = alpha * A B + beta * C, beta 0 or 1; A (M x K), B (K x N) strided.
// B is copied NR columns at a time into a zero-padded panel (K * NR floats of `panel`), which
// every block of MR rows of A then multiplies.
void gemm(int M, int N, int K, float alpha, Strided A, Strided B, float beta, float* C, int ldc,
          float* panel) {
  for (int j0 = 0; j0 < N; j0 += NR) {
    const int nr = std::min(NR, N - j0);
    for (int kk = 0; kk < K; ++kk) {
      const float* b = B.p + kk * B.rs + j0 * B.cs;
      float* dst = panel + kk * NR;
      if (B.cs == 1 && nr == NR) {  // a row-major B: one 64-byte copy a row
        std::memcpy(dst, b, sizeof(float) * NR);
        continue;
      }
      for (int j = 0; j < nr; ++j) dst[j] = b[j * B.cs];
      for (int j = nr; j < NR; ++j) dst[j] = 0.f;
    }
    multiply_panel(M, K, alpha, A, panel, beta, C + j0, ldc, nr);
  }
}

// A B already cut into panels (cut_panels, row_panels): columns j0 .. j0 + NR of B are K x NR
// floats at p + (j0 / NR) * stride, zero past B's last column (a product may use the first K
// rows of longer panels).
struct Panels {
  const float* p;
  int64_t stride;
};

void gemm(int M, int N, int K, float alpha, Strided A, Panels B, float beta, float* C, int ldc) {
  for (int j0 = 0; j0 < N; j0 += NR)
    multiply_panel(M, K, alpha, A, B.p + (j0 / NR) * B.stride, beta, C + j0, ldc,
                   std::min(NR, N - j0));
}

// Rows 0 .. count - 1 of x (row-major, d wide) as the columns of x^T cut into ceil(block / NR)
// panels of d x NR floats at dst, zero past row `count`: the B of a product with x^T, cut once.
void cut_panels(const float* x, int64_t count, int64_t d, int64_t block, float* dst) {
  std::fill(dst, dst + (block + NR - 1) / NR * NR * d, 0.f);
  for (int64_t j = 0; j < count; ++j) {
    const float* row = x + j * d;
    float* col = dst + (j / NR) * d * NR + j % NR;
    for (int64_t kk = 0; kk < d; ++kk) col[kk * NR] = row[kk];
  }
}

// Rows 0 .. count - 1 of x (row-major, d wide) cut into ceil(d / NR) panels of block x NR floats
// at dst, zero past column d and row `count`: the B of a product with x itself, cut once.
void cut_row_panels(const float* x, int64_t count, int64_t d, int64_t block, float* dst) {
  const int64_t per = (d + NR - 1) / NR;
  std::fill(dst, dst + per * block * NR, 0.f);
  for (int64_t j = 0; j < count; ++j)
    for (int64_t p = 0; p < per; ++p)
      std::memcpy(dst + (p * block + j) * NR, x + j * d + p * NR,
                  sizeof(float) * std::min<int64_t>(NR, d - p * NR));
}

// x (N, T, d) as the B of products with x^T (transposed) or with x, `block` rows a tile:
// (N, tiles, ceil(block / NR), d, NR) by cut_panels, or (N, tiles, ceil(d / NR), block, NR) by
// cut_row_panels. Every query block of the forward multiplies the same key tiles, so each is
// cut into panels once, not once per product, and a tile's panels lie side by side in memory.
at::Tensor tile_panels(const at::Tensor& x, int64_t block, bool transposed) {
  const int64_t N = x.size(0), T = x.size(1), d = x.size(2);
  const int64_t tiles = (T + block - 1) / block;
  const int64_t per = transposed ? (block + NR - 1) / NR : (d + NR - 1) / NR;
  at::Tensor out = transposed ? at::empty({N, tiles, per, d, NR}, x.options())
                              : at::empty({N, tiles, per, block, NR}, x.options());
  const int64_t tile_floats = out.stride(1);
  const float* src = x.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, N * tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / tiles, t = item % tiles;
      const float* rows = src + (n * T + t * block) * d;
      const int64_t count = std::min(block, T - t * block);
      if (transposed)
        cut_panels(rows, count, d, block, dst + item * tile_floats);
      else
        cut_row_panels(rows, count, d, block, dst + item * tile_floats);
    }
  });
  return out;
}

// The panels of tile t of head n in tile_panels(x, block) (x's last axis d).
inline Panels tile(const at::Tensor& panels, int64_t n, int64_t t) {
  return {panels.data_ptr<float>() + (n * panels.size(1) + t) * panels.stride(1), panels.stride(2)};
}

// Row-major (rows x cols, leading dimension ld) as a Strided matrix, or its transpose.
inline Strided mat(const float* p, int64_t ld) { return {p, ld, 1}; }
inline Strided mat_t(const float* p, int64_t ld) { return {p, 1, ld}; }

// exp(x) for x <= 0 (every argument here is a score minus its row's maximum or log-sum-exp):
// Cephes' expf, 2^n * p(r) with |r| <= ln2 / 2, in branch-free steps the compiler vectorises.
// Relative error about 1e-7; below -87 it returns 0.
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// Keys of a tile starting at k0 (cols wide) that query i may see: all, or under causal those at
// or before its position i + offset (offset = T_k - T_q); 0 .. cols.
inline int visible(bool causal, int64_t i, int64_t offset, int64_t k0, int cols) {
  if (!causal) return cols;
  return static_cast<int>(std::clamp<int64_t>(i + offset - k0 + 1, 0, cols));
}

struct Dims {
  int64_t N, T_q, T_k, d_k, d_v, offset;
  bool causal;
  float scale;
};

// One query block [q0, q0 + rows) of head n: online softmax over its visible key tiles.
// s: rows x block_k scratch; acc: rows x d_v; m, l: rows.
void forward_block(const Dims& D, const float* q, const at::Tensor& kP, const at::Tensor& vP,
                   float* out, float* lse, int64_t n, int64_t q0, int rows, int block_k, float* s,
                   float* acc, float* m, float* l) {
  const float* qn = q + (n * D.T_q + q0) * D.d_k;
  const int d_k = D.d_k, d_v = D.d_v;
  std::fill(m, m + rows, 0.f);  // any value: l = 0 until a key is seen
  std::fill(l, l + rows, 0.f);
  std::fill(acc, acc + rows * d_v, 0.f);
  const int64_t stop = D.causal ? std::clamp<int64_t>(q0 + rows + D.offset, 0, D.T_k) : D.T_k;
  for (int64_t k0 = 0; k0 < stop; k0 += block_k) {
    const int cols = static_cast<int>(std::min<int64_t>(block_k, stop - k0));
    gemm(rows, cols, d_k, D.scale, mat(qn, d_k), tile(kP, n, k0 / block_k), 0.f, s, block_k);
    for (int r = 0; r < rows; ++r) {
      float* sr = s + r * block_k;
      const int vis = visible(D.causal, q0 + r, D.offset, k0, cols);
      if (vis == 0) {
        std::fill(sr, sr + cols, 0.f);
        continue;
      }
      float mx = sr[0];
      for (int c = 1; c < vis; ++c) mx = std::max(mx, sr[c]);
      const float m_new = l[r] == 0.f ? mx : std::max(m[r], mx);
      const float alpha = l[r] == 0.f ? 0.f : exp_nonpositive(m[r] - m_new);
      float sum = 0.f;
      for (int c = 0; c < vis; ++c) {
        sr[c] = exp_nonpositive(sr[c] - m_new);
        sum += sr[c];
      }
      std::fill(sr + vis, sr + cols, 0.f);
      float* ar = acc + r * d_v;
      for (int c = 0; c < d_v; ++c) ar[c] *= alpha;
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
    }
    gemm(rows, d_v, cols, 1.f, mat(s, block_k), tile(vP, n, k0 / block_k), 1.f, acc, d_v);
  }
  float* on = out + (n * D.T_q + q0) * d_v;
  for (int r = 0; r < rows; ++r) {
    const float inv = l[r] == 0.f ? 0.f : 1.f / l[r];
    for (int c = 0; c < d_v; ++c) on[r * d_v + c] = acc[r * d_v + c] * inv;
    lse[n * D.T_q + q0 + r] = l[r] == 0.f ? -INFINITY : m[r] + std::log(l[r]);
  }
}

// Key block [k0, k0 + cols) of head n against every query block that sees it: adds into
// dk, dv (rows k0 .. of head n) and into dq_n (T_q x d_k, head n's accumulator).
// p, dp: block_q x block_k scratch; kTj, vTj: K_j^T and V_j^T cut into panels (cut_panels).
void backward_block(const Dims& D, const float* q, const float* k, Panels kTj, const float* v,
                    Panels vTj,
                    const float* dout, const float* lse, const float* delta, float* dq_n, float* dk,
                    float* dv, int64_t n, int64_t k0, int n_cols, int block_q, int block_k, float* p,
                    float* dp, float* panel) {
  const int d_k = D.d_k, d_v = D.d_v;
  const float* qn = q + n * D.T_q * d_k;
  const float* don = dout + n * D.T_q * d_v;
  const float* kj = k + (n * D.T_k + k0) * d_k;
  const float* vj = v + (n * D.T_k + k0) * d_v;
  float* dkj = dk + (n * D.T_k + k0) * d_k;
  float* dvj = dv + (n * D.T_k + k0) * d_v;
  // under causal, queries before position k0 see none of these keys
  const int64_t first = D.causal ? std::max<int64_t>(0, k0 - D.offset) : 0;
  for (int64_t q0 = first; q0 < D.T_q; q0 += block_q) {
    const int rows = static_cast<int>(std::min<int64_t>(block_q, D.T_q - q0));
    // keys past the block's last query position get no weight: leave them out of every product
    const int cols = D.causal ? static_cast<int>(std::min<int64_t>(n_cols, q0 + rows + D.offset - k0))
                              : n_cols;
    gemm(rows, cols, d_k, D.scale, mat(qn + q0 * d_k, d_k), kTj, 0.f, p, block_k);
    const float* lse_i = lse + n * D.T_q + q0;
    for (int r = 0; r < rows; ++r) {  // p = A_ij = exp(S_ij - lse_i), 0 where not visible
      float* pr = p + r * block_k;
      const int vis = visible(D.causal, q0 + r, D.offset, k0, cols);
      const float shift = lse_i[r];
      for (int c = 0; c < vis; ++c) pr[c] = exp_nonpositive(pr[c] - shift);
      std::fill(pr + vis, pr + cols, 0.f);
    }
    const float* do_i = don + q0 * d_v;
    gemm(cols, d_v, rows, 1.f, mat_t(p, block_k), mat(do_i, d_v), 1.f, dvj, d_v, panel);  // dv += A^T dO
    gemm(rows, cols, d_v, 1.f, mat(do_i, d_v), vTj, 0.f, dp, block_k);  // dA = dO V^T
    const float* delta_i = delta + n * D.T_q + q0;
    for (int r = 0; r < rows; ++r) {  // dS = A * (dA - delta)
      float* dpr = dp + r * block_k;
      const float* pr = p + r * block_k;
      const float dl = delta_i[r];
      for (int c = 0; c < cols; ++c) dpr[c] = pr[c] * (dpr[c] - dl);
    }
    gemm(rows, d_k, cols, D.scale, mat(dp, block_k), mat(kj, d_k), 1.f, dq_n + q0 * d_k, d_k, panel);
    gemm(cols, d_k, rows, D.scale, mat_t(dp, block_k), mat(qn + q0 * d_k, d_k), 1.f, dkj, d_k, panel);
  }
}

Dims dims(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, "q, k, v must be (N, T, d)");
  TORCH_CHECK(q.scalar_type() == at::kFloat && k.scalar_type() == at::kFloat &&
                  v.scalar_type() == at::kFloat, "float32 only");
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(), "contiguous only");
  TORCH_CHECK(q.size(0) == k.size(0) && k.size(0) == v.size(0) && k.size(1) == v.size(1) &&
                  q.size(2) == k.size(2), "shapes do not match");
  return Dims{q.size(0), q.size(1), k.size(1), q.size(2), v.size(2), k.size(1) - q.size(1),
              causal, static_cast<float>(1.0 / std::sqrt(static_cast<double>(q.size(2))))};
}

// Floats of gemm's B panel: NR columns by the longest inner dimension of any tile product.
int64_t panel_floats(const Dims& D, int64_t block_q, int64_t block_k) {
  return NR * std::max({block_q, block_k, D.d_k, D.d_v});
}

// Calls fn(item, slot, scratch) for every item in 0 .. n_items - 1, in that order, each item
// taken by whichever thread is free (slot: 0 .. threads - 1, that thread's number), so a thread
// the OS puts aside on a busy machine does less of the work instead of holding up the rest.
// Thread `slot` always does item `slot` first, so every thread takes part in every call (which
// the tests of the backward's per-thread dq copies rely on).
// scratch: `scratch_floats` floats of the thread's own.
template <typename Fn>
void for_each_item(int64_t n_items, int64_t scratch_floats, const Fn& fn) {
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), std::max<int64_t>(n_items, 1));
  std::atomic<int64_t> next{threads};
  at::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(scratch_floats);
    for (int64_t slot = begin; slot < end; ++slot) {
      if (slot < n_items) fn(slot, slot, scratch.data());  // every thread's first item is its own
      for (int64_t item; (item = next.fetch_add(1)) < n_items;) fn(item, slot, scratch.data());
    }
  });
}

std::tuple<at::Tensor, at::Tensor> flash_forward(const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& v, bool causal,
                                                 int64_t block_q, int64_t block_k) {
  const Dims D = dims(q, k, v, causal);
  TORCH_CHECK(block_q > 0 && block_k > 0, "block sizes must be positive");
  at::Tensor out = at::empty({D.N, D.T_q, D.d_v}, q.options());
  at::Tensor lse = at::empty({D.N, D.T_q}, q.options());
  const int64_t n_blocks = (D.T_q + block_q - 1) / block_q;
  const float* qp = q.data_ptr<float>();
  float *op = out.data_ptr<float>(), *lp = lse.data_ptr<float>();
  // K^T's and V's key tiles, cut into panels once
  const at::Tensor kP = tile_panels(k, block_k, true), vP = tile_panels(v, block_k, false);
  const int64_t scratch = block_q * block_k + block_q * D.d_v + 2 * block_q;  // s, acc, m, l
  // the last query blocks see the most keys under causal: they go first
  for_each_item(D.N * n_blocks, scratch, [&](int64_t t, int64_t, float* s) {
    const int64_t n = t % D.N, q0 = (n_blocks - 1 - t / D.N) * block_q;
    const int rows = static_cast<int>(std::min(block_q, D.T_q - q0));
    float* acc = s + block_q * block_k;
    float* m = acc + block_q * D.d_v;
    forward_block(D, qp, kP, vP, op, lp, n, q0, rows, static_cast<int>(block_k), s, acc, m,
                  m + block_q);
  });
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_backward(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, int64_t block_q, int64_t block_k) {
  const Dims D = dims(q, k, v, causal);
  TORCH_CHECK(block_q > 0 && block_k > 0, "block sizes must be positive");
  TORCH_CHECK(dout.is_contiguous() && out.is_contiguous() && lse.is_contiguous(),
              "contiguous only");
  at::Tensor delta = (dout * out).sum(-1);  // (N, T_q): rowsum(dO * O) = rowsum(dA * A)
  at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
  const int64_t n_blocks = (D.T_k + block_k - 1) / block_k;
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), D.N * n_blocks);
  // dk, dv rows of a key block have one writer (the thread that took it); dq rows get a
  // contribution from every key block, so threads other than the first add into copies
  at::Tensor dq_extra = at::zeros({std::max<int64_t>(threads - 1, 0), D.N, D.T_q, D.d_k},
                                  q.options());
  const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
  const float *dop = dout.data_ptr<float>(), *lp = lse.data_ptr<float>();
  const float* deltap = delta.data_ptr<float>();
  float *dqp = dq.data_ptr<float>(), *dkp = dk.data_ptr<float>(), *dvp = dv.data_ptr<float>();
  float* extrap = dq_extra.data_ptr<float>();
  const int64_t head = D.T_q * D.d_k;
  const int bq = static_cast<int>(block_q), bk = static_cast<int>(block_k);
  // the first key blocks are seen by the most queries under causal: they go first
  // per thread: p, dp, gemm's panel, then the key block's K_j^T and V_j^T in panels
  const int64_t cut = (block_k + NR - 1) / NR * NR;
  const int64_t scratch = 2 * block_q * block_k + panel_floats(D, block_q, block_k) + cut * (D.d_k + D.d_v);
  for_each_item(D.N * n_blocks, scratch, [&](int64_t t, int64_t slot, float* p) {
    const int64_t n = t % D.N, k0 = (t / D.N) * block_k;
    float* dq_n = (slot == 0 ? dqp : extrap + (slot - 1) * D.N * head) + n * head;
    const int cols = static_cast<int>(std::min(block_k, D.T_k - k0));
    float* panel = p + 2 * block_q * block_k;
    float* kTj = panel + panel_floats(D, block_q, block_k);
    float* vTj = kTj + cut * D.d_k;
    cut_panels(kp + (n * D.T_k + k0) * D.d_k, cols, D.d_k, block_k, kTj);  // once per key block
    cut_panels(vp + (n * D.T_k + k0) * D.d_v, cols, D.d_v, block_k, vTj);
    backward_block(D, qp, kp, {kTj, D.d_k * NR}, vp, {vTj, D.d_v * NR}, dop, lp, deltap, dq_n, dkp, dvp, n, k0, cols, bq,
                   bk, p, p + block_q * block_k, panel);
  });
  if (threads > 1) dq.add_(dq_extra.sum(0));
  return {dq, dk, dv};
}

}  // namespace

// How many threads one at::parallel_for of this build really runs on (the tests check it is
// torch.get_num_threads(): built without -fopenmp, at::parallel_for runs everything on one).
int64_t threads_used() {
  std::atomic<int64_t> seen{0};
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    seen.fetch_or(int64_t(1) << (at::get_thread_num() % 63));
  });
  return __builtin_popcountll(static_cast<unsigned long long>(seen.load()));
}

TORCH_LIBRARY(course_flash, m) {
  m.def("threads_used() -> int", &threads_used);
  m.def("forward(Tensor q, Tensor k, Tensor v, bool causal, int block_q, int block_k)"
        " -> (Tensor, Tensor)");
  m.def("backward(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse,"
        " bool causal, int block_q, int block_k) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(course_flash, CPU, m) {
  m.impl("forward", &flash_forward);
  m.impl("backward", &flash_backward);
}
