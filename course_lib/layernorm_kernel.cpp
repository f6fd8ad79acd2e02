// Layer norm's hand-derived backward for the CPU, compiled (notebook 04's derivation, issue 21).
//
// The derivation is course_lib/layernorm.py's layernorm_backward. One vector x of D = d_model
// numbers was normalised with its mean mu and rstd = 1 / sqrt(var + eps), both saved by the
// forward (torch.native_layer_norm), and then scaled and shifted: out = gamma * x_hat + beta.
// With dout the gradient arriving at out:
//
//   x_hat  = (x - mu) * rstd                            recomputed here, never stored
//   g      = dout * gamma                               the gradient arriving at x_hat
//   dx     = rstd * (g - mean(g) - x_hat * mean(g * x_hat))          (means over the D numbers)
//   dgamma = sum over all vectors of dout * x_hat,   dbeta = sum over all vectors of dout.
//
// dx is not just g * rstd because mu and rstd depend on every x_j of the vector: moving one x_j
// moves the mean (the mean(g) term) and the spread (the x_hat * mean(g * x_hat) term) that every
// other entry was normalised with.
//
// Each vector (a row of D floats, a few hundred bytes, in L1 after the first pass) is read
// twice: pass 1 adds up the two row sums, sum(g) and sum(g * x_hat), and adds the row's share to
// dgamma and dbeta; pass 2, which needs both means, writes dx. x_hat and g are recomputed in
// pass 2 rather than kept from pass 1: a subtract and two multiplies cost less than a store and
// a load. Both loops are plain loops over j that the compiler turns into vector instructions
// (-O3 -march=native; -ffast-math lets it reorder the two row sums).
//
// Parallel with at::parallel_for (PyTorch's intra-op pool: torch.set_num_threads governs it;
// the build needs -fopenmp, or it runs on one thread): the rows are cut into one contiguous
// chunk per thread, and each chunk adds its dgamma, dbeta into a partial sum of its own; the
// partials are added up in chunk order at the end. No two threads write the same number, and the
// result does not depend on which thread ran which chunk. A chunk sums kBlockRows rows at a time
// in float (the vectorised loop) and adds each block's sums into double totals: summed in float
// over thousands of rows, dgamma was 1e-4 off at 6,000 rows of values near 60 (torch's own
// reductions sum in blocks too); this way the error is that of one block.
//
// Shapes, all float32 on the CPU, N = the product of the leading axes (e.g. B * T):
//   dout, x (N, D) (any leading axes, made contiguous here), mean, rstd (N,) or (N, 1),
//   gamma (D,); returns dx (N, D) shaped as x, dgamma (D,), dbeta (D,).
//
// Python calls torch.ops.course_layernorm.layer_norm (x, gamma, beta, eps): one autograd node,
// the forward and then this backward, with no step through Python (layernorm.py's
// layer_norm_torch; the .backward operator is the kernel alone).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace {

// A thread gets a chunk of at least this many floats: below, starting and joining it (a few
// microseconds) costs about what it saves (on the course's 2-core machine, 16384 floats took
// 17 us on one thread and 13 us on two; 8192 floats 12 us on one).
constexpr int64_t kMinChunkFloats = 8192;

// Rows whose dgamma, dbeta shares a chunk adds up in float before it adds them to its double
// totals (see above): the float sums stay short, and the extra adds are one per D floats per block.
constexpr int64_t kBlockRows = 64;

// One vector: both passes above. dgamma, dbeta are this chunk's partial sums, added to.
inline void row_backward(int64_t D, const float* __restrict__ dout, const float* __restrict__ x,
                         float mu, float rstd, const float* __restrict__ gamma,
                         float* __restrict__ dx, float* __restrict__ dgamma,
                         float* __restrict__ dbeta) {
  // pass 1: sum(g), sum(g * x_hat), and this row's dout * x_hat and dout into dgamma, dbeta
  float sum_g = 0.f, sum_g_xhat = 0.f;
  for (int64_t j = 0; j < D; ++j) {
    const float x_hat = (x[j] - mu) * rstd;
    const float g = dout[j] * gamma[j];
    sum_g += g;
    sum_g_xhat += g * x_hat;
    dgamma[j] += dout[j] * x_hat;
    dbeta[j] += dout[j];
  }
  const float mean_g = sum_g / D, mean_g_xhat = sum_g_xhat / D;
  // pass 2: dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))
  for (int64_t j = 0; j < D; ++j) {
    const float x_hat = (x[j] - mu) * rstd;
    dx[j] = rstd * (dout[j] * gamma[j] - mean_g - x_hat * mean_g_xhat);
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layernorm_backward(
    const at::Tensor& dout_in, const at::Tensor& x_in, const at::Tensor& mean_in,
    const at::Tensor& rstd_in, const at::Tensor& gamma_in) {
  for (const at::Tensor* t : {&dout_in, &x_in, &mean_in, &rstd_in, &gamma_in})
    TORCH_CHECK(t->scalar_type() == at::kFloat && t->device().is_cpu(),
                "course_layernorm.backward takes float32 CPU tensors");
  TORCH_CHECK(x_in.dim() >= 1 && x_in.size(-1) > 0 && dout_in.sizes() == x_in.sizes(),
              "dout and x must have the same shape (..., D) with D > 0");
  const int64_t D = x_in.size(-1), N = x_in.numel() / D;
  TORCH_CHECK(gamma_in.numel() == D && mean_in.numel() == N && rstd_in.numel() == N,
              "gamma must have D numbers, mean and rstd one per vector");
  const at::Tensor dout = dout_in.contiguous(), x = x_in.contiguous(),
                   mean = mean_in.contiguous(), rstd = rstd_in.contiguous(),
                   gamma = gamma_in.contiguous();
  at::Tensor dx = at::empty(x.sizes(), x.options());
  at::Tensor dgamma = at::empty({D}, x.options()), dbeta = at::empty({D}, x.options());

  const float *doutp = dout.data_ptr<float>(), *xp = x.data_ptr<float>(),
              *meanp = mean.data_ptr<float>(), *rstdp = rstd.data_ptr<float>(),
              *gammap = gamma.data_ptr<float>();
  float* dxp = dx.data_ptr<float>();

  // one chunk per thread, fewer where the chunks would be too small to be worth a thread
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), N));
  const int64_t chunks = std::clamp<int64_t>(N * D / kMinChunkFloats, 1, most);
  std::vector<double> partial(chunks * 2 * D, 0.0);  // chunk c: dgamma (D), then dbeta (D)
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    std::vector<float> block(2 * D);  // one block of rows: dgamma (D), then dbeta (D), in float
    for (int64_t c = first; c < last; ++c) {
      double* total = partial.data() + c * 2 * D;
      const int64_t end = N * (c + 1) / chunks;
      for (int64_t n0 = N * c / chunks; n0 < end; n0 += kBlockRows) {
        std::fill(block.begin(), block.end(), 0.f);
        for (int64_t n = n0; n < std::min(n0 + kBlockRows, end); ++n)
          row_backward(D, doutp + n * D, xp + n * D, meanp[n], rstdp[n], gammap, dxp + n * D,
                       block.data(), block.data() + D);
        for (int64_t j = 0; j < 2 * D; ++j) total[j] += block[j];
      }
    }
  });

  // dgamma, dbeta: the chunks' partial sums, added in chunk order
  float *dgammap = dgamma.data_ptr<float>(), *dbetap = dbeta.data_ptr<float>();
  for (int64_t j = 0; j < D; ++j) {
    double sum_dgamma = 0.0, sum_dbeta = 0.0;
    for (int64_t c = 0; c < chunks; ++c) {
      sum_dgamma += partial[c * 2 * D + j];
      sum_dbeta += partial[c * 2 * D + D + j];
    }
    dgammap[j] = static_cast<float>(sum_dgamma);
    dbetap[j] = static_cast<float>(sum_dbeta);
  }
  return {dx, dgamma, dbeta};
}

// Layer norm as one autograd node: the forward is torch.native_layer_norm (one fused call: the
// forward is not what the course derives), which saves x, mean and rstd (not x_hat: one pass
// less) for the backward above. The same node as layernorm.py's _LayerNormFunction, without a
// trip through Python in either direction.
class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& gamma, const at::Tensor& beta, double eps) {
    auto [out, mean, rstd] = at::native_layer_norm(x, {x.size(-1)}, gamma, beta, eps);
    ctx->save_for_backward({x, mean, rstd, gamma});
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dx, dgamma, dbeta] = layernorm_backward(grads[0], saved[0], saved[1], saved[2], saved[3]);
    return {dx, dgamma, dbeta, at::Tensor()};
  }
};

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                      double eps) {
  return LayerNormFunction::apply(x, gamma, beta, eps);
}

// below autograd (torch.inference_mode): the forward alone
at::Tensor layer_norm_inference(const at::Tensor& x, const at::Tensor& gamma,
                                const at::Tensor& beta, double eps) {
  return std::get<0>(at::native_layer_norm(x, {x.size(-1)}, gamma, beta, eps));
}

}  // namespace

TORCH_LIBRARY(course_layernorm, m) {
  m.def("layer_norm(Tensor x, Tensor gamma, Tensor beta, float eps) -> Tensor");
  m.def("backward(Tensor dout, Tensor x, Tensor mean, Tensor rstd, Tensor gamma)"
        " -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(course_layernorm, Autograd, m) { m.impl("layer_norm", &layer_norm); }

TORCH_LIBRARY_IMPL(course_layernorm, CPU, m) {
  m.impl("layer_norm", &layer_norm_inference);
  m.impl("backward", &layernorm_backward);
}
