#include "trainer/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "trainer/cpu/blas.h"
#include "trainer/cpu/kernel_variant.h"
#include "trainer/cpu/ops.h"
#include "trainer/optimizer.h"
#include "trainer/rng.h"

namespace normsweep::trainer::cpu {
namespace {
constexpr float kLayerNormEps = 1e-5f;

// Sum of squares in double, in eight interleaved partial sums (a fixed order,
// so deterministic) that the compiler can keep in vector registers.
double SumOfSquares(const float* x, size_t n) {
  double acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(x[i + j]) * x[i + j];
  }
  double sum = 0.0;
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  for (double a : acc) sum += a;
  return sum;
}

// A norm over N rows of C (ModelConfig::norm): LayerNorm (w, b; mean and
// rstd saved) or RMSNorm (w only; rstd saved, mean and b unused).
void NormForward(NormKind kind, float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                 int N, int C) {
  if (kind == NormKind::kRmsNorm) {
    RmsNormForward(out, rstd, inp, w, N, C, kLayerNormEps);
  } else {
    LayerNormForward(out, mean, rstd, inp, w, b, N, C, kLayerNormEps);
  }
}
// Accumulates into dinp; overwrites dw (and db under LayerNorm).
void NormBackward(NormKind kind, float* dinp, float* dw, float* db, const float* dout, const float* inp,
                  const float* w, const float* mean, const float* rstd, int N, int C) {
  if (kind == NormKind::kRmsNorm) {
    RmsNormBackward(dinp, dw, dout, inp, w, rstd, N, C);
  } else {
    LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  }
}

// out = alpha * x + s (DeepNorm's residual; plain Add when alpha is 1).
void Residual(float* out, const float* x, const float* s, float alpha, size_t n) {
  if (alpha == 1.0f) {
    Add(out, x, s, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = alpha * x[i] + s[i];
}

void Scale(float* x, float a, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] *= a;
}
}  // namespace

StatusOr<std::unique_ptr<Backend>> CpuBackend::Create(const BackendOptions& options) {
  TRAINER_RETURN_IF_ERROR(ValidateModelConfig(options.model));
  if (options.threads < 1) return InvalidArgument("threads: must be >= 1");
  if (options.precision != Precision::kFp32) {
    return InvalidArgument(std::string("precision: ") + PrecisionName(options.precision) +
                           " needs a CUDA device; the cpu backend computes in fp32");
  }
  if (!(options.z_loss >= 0.0 && std::isfinite(options.z_loss))) {
    return InvalidArgument("z_loss: must be a finite number >= 0");
  }
  return std::unique_ptr<Backend>(new CpuBackend(options));
}

CpuBackend::CpuBackend(const BackendOptions& options)
    : options_(options), model_(options.model), layout_(ParamLayout::ForModel(options.model)) {
  SetThreads(options.threads);
  params_.assign(layout_.total(), 0.0f);
  grads_.assign(layout_.total(), 0.0f);
  m_.assign(layout_.total(), 0.0f);
  v_.assign(layout_.total(), 0.0f);
  grad_sq_norms_.assign(layout_.tensors().size(), 0.0);
  max_attn_logit_.assign(static_cast<size_t>(model_.layers), -INFINITY);
  sin_pos_.assign(static_cast<size_t>(model_.seq_len) * model_.d_model, 0.0f);
  SinusoidalPositions(sin_pos_.data(), model_.seq_len, model_.d_model);
  parts_.resize(static_cast<size_t>(options.threads));
  for (size_t p = 1; p < parts_.size(); ++p) parts_[p].grads.assign(layout_.total(), 0.0f);
  EnsureCapacity(std::max(1, options.max_batch_size));
}

std::string CpuBackend::kernels() const {
  return std::string(KernelVariantName(ActiveKernelVariant())) + ", gemm " + GemmDescription();
}

std::vector<CpuBackend::Slice> CpuBackend::SplitBatch(int B) const {
  const int parts = std::max(1, std::min(options_.threads, B));
  std::vector<Slice> slices(static_cast<size_t>(parts));
  for (int p = 0; p < parts; ++p) {
    slices[static_cast<size_t>(p)].b0 = B * p / parts;
    slices[static_cast<size_t>(p)].b1 = B * (p + 1) / parts;
  }
  return slices;
}

void CpuBackend::EnsureCapacity(int B) {
  // A part holds at most ceil(B / threads) sequences (one when B < threads).
  const int per_part = (B + options_.threads - 1) / options_.threads;
  if (per_part <= part_capacity_) return;
  const size_t N = static_cast<size_t>(per_part) * model_.seq_len;
  const size_t C = model_.d_model, F = model_.d_ff;
  const bool dropout = model_.dropout > 0.0f;
  for (Part& part : parts_) {
    // Lay out every buffer of the part in one arena.
    BufferPlan plan;
    plan.push_back({&part.emb_out, N * C});
    if (dropout) plan.push_back({&part.emb_mask, N * C});
    if (layout_.has_emb_ln()) {
      plan.push_back({&part.emb_ln_out, N * C});
      plan.push_back({&part.emb_ln_mean, N});
      plan.push_back({&part.emb_ln_rstd, N});
    }
    PlanBlockActivations(model_, per_part, &part.blocks, &plan);
    plan.push_back({&part.lnf_out, N * C});
    plan.push_back({&part.lnf_mean, N});
    plan.push_back({&part.lnf_rstd, N});
    plan.push_back({&part.logits, N * kVocabSize});
    plan.push_back({&part.probs, N * kVocabSize});
    plan.push_back({&part.row_loss, N});
    plan.push_back({&part.row_log_z, N});
    plan.push_back({&part.grad_res_a, N * C});
    plan.push_back({&part.grad_res_b, N * C});
    plan.push_back({&part.grad_masked, N * C});
    plan.push_back({&part.grad_atty, N * C});
    plan.push_back({&part.grad_qkv, N * 3 * C});
    plan.push_back({&part.grad_fc1_act, N * F});
    if (layout_.has_emb_ln()) plan.push_back({&part.grad_norm_in, N * C});  // Peri-LN
    if (model_.qk_norm) {
      plan.push_back({&part.grad_qk, N * C});
      plan.push_back({&part.grad_qk_raw, N * C});
    }
    part.arena.assign(ArenaFloats(plan, 16) + 16, 0.0f);  // 64-byte aligned chunks
    float* base = part.arena.data();
    while (reinterpret_cast<uintptr_t>(base) % 64 != 0) ++base;
    AssignArena(plan, base, 16);
    part.head_max.assign(static_cast<size_t>(per_part) * model_.heads, 0.0f);
    part.block_max.assign(static_cast<size_t>(model_.layers), -INFINITY);
  }
  part_capacity_ = per_part;
}

Status CpuBackend::SetParameters(const std::vector<float>& host) {
  if (host.size() != layout_.total()) return InvalidArgument("parameters: wrong size");
  params_ = host;
  return OkStatus();
}
Status CpuBackend::GetParameters(std::vector<float>* host) {
  *host = params_;
  return OkStatus();
}
Status CpuBackend::GetGradients(std::vector<float>* host) {
  *host = grads_;
  return OkStatus();
}
Status CpuBackend::SetOptimizerState(const std::vector<float>& m, const std::vector<float>& v) {
  if (m.size() != layout_.total() || v.size() != layout_.total()) {
    return InvalidArgument("optimizer state: wrong size");
  }
  m_ = m;
  v_ = v;
  return OkStatus();
}
Status CpuBackend::GetOptimizerState(std::vector<float>* m, std::vector<float>* v) {
  *m = m_;
  *v = v_;
  return OkStatus();
}

void CpuBackend::QkNormForward(BlockActivations& a, const BlockOffsets& w, int N) {
  // Each token's q (and k) is H contiguous rows of hd in qkv: copy them
  // aside, then normalise the copy back into qkv, token by token.
  const int C = model_.d_model, H = model_.heads, hd = model_.head_dim();
  const float* P = params_.data();
  for (int n = 0; n < N; ++n) {
    float* q = a.qkv + static_cast<size_t>(n) * 3 * C;
    float* k = q + C;
    float* q_raw = a.q_raw + static_cast<size_t>(n) * C;
    float* k_raw = a.k_raw + static_cast<size_t>(n) * C;
    std::memcpy(q_raw, q, sizeof(float) * C);
    std::memcpy(k_raw, k, sizeof(float) * C);
    NormForward(model_.norm, q, a.q_mean + static_cast<size_t>(n) * H, a.q_rstd + static_cast<size_t>(n) * H, q_raw,
                P + w.qn_w, P + w.qn_b, H, hd);
    NormForward(model_.norm, k, a.k_mean + static_cast<size_t>(n) * H, a.k_rstd + static_cast<size_t>(n) * H, k_raw,
                P + w.kn_w, P + w.kn_b, H, hd);
  }
}

void CpuBackend::QkNormBackward(Part& part, BlockActivations& a, const BlockOffsets& w, float* G, int N) {
  // The norms' weights are shared by all N*H rows, so their backward runs
  // once over the gathered (N*H, hd) gradient.
  const int C = model_.d_model, H = model_.heads, hd = model_.head_dim();
  const float* P = params_.data();
  const size_t NC = static_cast<size_t>(N) * C;
  for (int which = 0; which < 2; ++which) {  // q, then k
    const size_t off = which == 0 ? 0 : static_cast<size_t>(C);
    for (int n = 0; n < N; ++n) {
      std::memcpy(part.grad_qk + static_cast<size_t>(n) * C, part.grad_qkv + static_cast<size_t>(n) * 3 * C + off,
                  sizeof(float) * C);
    }
    std::memset(part.grad_qk_raw, 0, sizeof(float) * NC);
    if (which == 0) {
      NormBackward(model_.norm, part.grad_qk_raw, G + w.qn_w, G + w.qn_b, part.grad_qk, a.q_raw, P + w.qn_w, a.q_mean,
                   a.q_rstd, N * H, hd);
    } else {
      NormBackward(model_.norm, part.grad_qk_raw, G + w.kn_w, G + w.kn_b, part.grad_qk, a.k_raw, P + w.kn_w, a.k_mean,
                   a.k_rstd, N * H, hd);
    }
    for (int n = 0; n < N; ++n) {
      std::memcpy(part.grad_qkv + static_cast<size_t>(n) * 3 * C + off, part.grad_qk_raw + static_cast<size_t>(n) * C,
                  sizeof(float) * C);
    }
  }
}

const float* CpuBackend::BlockForward(Part& part, int l, const float* x, int B, int T, size_t mask_first,
                                      uint64_t dropout_seed) {
  const int C = model_.d_model, F = model_.d_ff, H = model_.heads;
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_.data();
  const bool dropout = dropout_active_;
  const float p_drop = model_.dropout;
  const NormKind nk = model_.norm;
  const float alpha = static_cast<float>(model_.ResidualAlpha());
  BlockActivations& a = part.blocks[static_cast<size_t>(l)];
  const BlockOffsets& w = layout_.blocks()[static_cast<size_t>(l)];
  a.x_in = const_cast<float*>(x);
  // Pre-LN and Peri-LN normalise each sublayer's input; Post-LN and
  // DeepNorm the residual sum; Peri-LN also the sublayer's output.
  const bool norm_in = !a.norm_after_residual();
  const bool peri = a.kind == Placement::kPeriLN;
  // Attention sublayer.
  const float* attn_in = x;
  if (norm_in) {
    NormForward(nk, a.ln1_out, a.ln1_mean, a.ln1_rstd, x, P + w.ln1_w, P + w.ln1_b, N, C);
    attn_in = a.ln1_out;
  }
  MatmulForward(a.qkv, attn_in, P + w.qkv_w, P + w.qkv_b, N, C, 3 * C);
  if (model_.qk_norm) QkNormForward(a, w, N);
  AttentionForward(a.atty, a.att, a.qkv, B, T, C, H, record_attn_max_ ? part.head_max.data() : nullptr);
  if (record_attn_max_) {
    float& m = part.block_max[static_cast<size_t>(l)];
    for (int i = 0; i < B * H; ++i) m = std::max(m, part.head_max[static_cast<size_t>(i)]);
  }
  MatmulForward(a.attn_out, a.atty, P + w.proj_w, P + w.proj_b, N, C, C);
  float* s1 = a.attn_out;
  if (peri) {
    NormForward(nk, a.ln1o_out, a.ln1o_mean, a.ln1o_rstd, a.attn_out, P + w.ln1o_w, P + w.ln1o_b, N, C);
    s1 = a.ln1o_out;
  }
  if (dropout) {
    MakeDropoutMaskSlice(a.attn_mask, mask_first, NC, p_drop, MixSeed(dropout_seed, 2 * l + 1));
    Multiply(s1, s1, a.attn_mask, NC);
  }
  Residual(a.res1, x, s1, alpha, NC);
  const float* x1 = a.res1;
  if (!norm_in) {
    NormForward(nk, a.ln1_out, a.ln1_mean, a.ln1_rstd, a.res1, P + w.ln1_w, P + w.ln1_b, N, C);
    x1 = a.ln1_out;
  }
  // FFN sublayer.
  const float* ffn_in = x1;
  if (norm_in) {
    NormForward(nk, a.ln2_out, a.ln2_mean, a.ln2_rstd, x1, P + w.ln2_w, P + w.ln2_b, N, C);
    ffn_in = a.ln2_out;
  }
  MatmulForward(a.fc1_act, ffn_in, P + w.fc1_w, P + w.fc1_b, N, C, F);
  ReluForward(a.fc1_act, static_cast<size_t>(N) * F);
  MatmulForward(a.ffn_out, a.fc1_act, P + w.fc2_w, P + w.fc2_b, N, F, C);
  float* s2 = a.ffn_out;
  if (peri) {
    NormForward(nk, a.ln2o_out, a.ln2o_mean, a.ln2o_rstd, a.ffn_out, P + w.ln2o_w, P + w.ln2o_b, N, C);
    s2 = a.ln2o_out;
  }
  if (dropout) {
    MakeDropoutMaskSlice(a.ffn_mask, mask_first, NC, p_drop, MixSeed(dropout_seed, 2 * l + 2));
    Multiply(s2, s2, a.ffn_mask, NC);
  }
  Residual(a.res2, x1, s2, alpha, NC);
  if (!norm_in) NormForward(nk, a.ln2_out, a.ln2_mean, a.ln2_rstd, a.res2, P + w.ln2_w, P + w.ln2_b, N, C);
  return a.out();
}

LossStats CpuBackend::Forward(Part& part, const Batch& batch, Slice s, uint64_t dropout_seed) {
  const int B = s.b1 - s.b0, T = batch.seq_len, C = model_.d_model;
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  // Dropout masks are drawn for the whole batch's (B*T, C) activations, so a
  // part takes its rows' slice of each: the same masks for any thread count.
  const size_t mask_first = static_cast<size_t>(s.b0) * T * C;
  const int32_t* inputs = batch.inputs.data() + static_cast<size_t>(s.b0) * T;
  const int32_t* targets = batch.targets.data() + static_cast<size_t>(s.b0) * T;
  const float* P = params_.data();
  const bool dropout = dropout_active_;
  const float p_drop = model_.dropout;
  const NormKind nk = model_.norm;

  const float* pos = layout_.has_pos_emb() ? P + layout_.pos_emb() : sin_pos_.data();
  EncoderForward(part.emb_out, inputs, P + layout_.tok_emb(), pos, B, T, C, std::sqrt(static_cast<float>(C)));
  float* x0 = part.emb_out;
  if (layout_.has_emb_ln()) {
    NormForward(nk, part.emb_ln_out, part.emb_ln_mean, part.emb_ln_rstd, part.emb_out, P + layout_.lnemb_w(),
                P + layout_.lnemb_b(), N, C);
    x0 = part.emb_ln_out;
  }
  if (dropout) {
    MakeDropoutMaskSlice(part.emb_mask, mask_first, NC, p_drop, MixSeed(dropout_seed, 0));
    Multiply(x0, x0, part.emb_mask, NC);
  }

  const float* x = x0;
  for (int l = 0; l < model_.layers; ++l) x = BlockForward(part, l, x, B, T, mask_first, dropout_seed);
  const float* h = x;
  if (layout_.has_final_ln()) {
    NormForward(nk, part.lnf_out, part.lnf_mean, part.lnf_rstd, x, P + layout_.lnf_w(), P + layout_.lnf_b(), N, C);
    h = part.lnf_out;
  }
  MatmulForward(part.logits, h, P + layout_.head_w(), P + layout_.head_b(), N, C, kVocabSize);
  CrossEntropyStats ce =
      CrossEntropyForward(part.probs, part.row_loss, part.row_log_z, part.logits, targets, N, kVocabSize);
  LossStats stats;
  stats.loss_sum = ce.loss_sum;
  stats.count = ce.count;
  stats.correct = ce.correct;
  stats.log_z_sum = ce.log_z_sum;
  stats.log_z_sq_sum = SumOfSquares(part.row_log_z, static_cast<size_t>(N));  // ignored rows hold 0
  return stats;
}

void CpuBackend::BlockBackward(Part& part, int l, int B, int T, float* G, float*& dx, float*& dtmp) {
  const int C = model_.d_model, F = model_.d_ff, H = model_.heads;
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_.data();
  const NormKind nk = model_.norm;
  const float alpha = static_cast<float>(model_.ResidualAlpha());
  BlockActivations& a = part.blocks[static_cast<size_t>(l)];
  const BlockOffsets& w = layout_.blocks()[static_cast<size_t>(l)];
  const bool norm_in = !a.norm_after_residual();
  const bool peri = a.kind == Placement::kPeriLN;
  const float* attn_in = norm_in ? a.ln1_out : a.x_in;
  const float* ffn_in = norm_in ? a.ln2_out : a.ln1_out;
  // A sublayer's backward pass, every placement: from the gradient of what
  // it adds to the residual stream (dout) to its input's, written into
  // dinput, or with accumulate set to alpha * dinput + it (dinput then
  // holds the residual sum's gradient; dout is read before dinput changes).
  // The two sublayers differ only in `core`, which takes the gradient of
  // the sublayer's output before any output norm and is called with
  // dinput ready for its last product.
  auto sublayer_backward = [&](const float* dout, float* dinput, bool accumulate, const float* mask,
                               size_t out_norm_w, size_t out_norm_b, const float* out_norm_in, const float* mean,
                               const float* rstd, auto core) {
    if (dropout_active_) {
      Multiply(part.grad_masked, dout, mask, NC);
      dout = part.grad_masked;
    }
    if (peri) {
      std::memset(part.grad_norm_in, 0, sizeof(float) * NC);
      NormBackward(nk, part.grad_norm_in, G + out_norm_w, G + out_norm_b, dout, out_norm_in, P + out_norm_w, mean,
                   rstd, N, C);
      dout = part.grad_norm_in;
    }
    core(dout, [&] {
      if (accumulate && alpha != 1.0f) Scale(dinput, alpha, NC);
    });
  };
  auto ffn_backward = [&](const float* dout, float* dinput, bool accumulate) {
    sublayer_backward(dout, dinput, accumulate, a.ffn_mask, w.ln2o_w, w.ln2o_b, a.ffn_out, a.ln2o_mean, a.ln2o_rstd,
                      [&](const float* d, auto before_last) {
                        MatmulBackward(part.grad_fc1_act, G + w.fc2_w, G + w.fc2_b, d, a.fc1_act, P + w.fc2_w, N, F,
                                       C, false);
                        ReluBackward(part.grad_fc1_act, part.grad_fc1_act, a.fc1_act, static_cast<size_t>(N) * F);
                        before_last();
                        MatmulBackward(dinput, G + w.fc1_w, G + w.fc1_b, part.grad_fc1_act, ffn_in, P + w.fc1_w, N,
                                       C, F, accumulate);
                      });
  };
  auto attention_backward = [&](const float* dout, float* dinput, bool accumulate) {
    sublayer_backward(dout, dinput, accumulate, a.attn_mask, w.ln1o_w, w.ln1o_b, a.attn_out, a.ln1o_mean,
                      a.ln1o_rstd, [&](const float* d, auto before_last) {
                        MatmulBackward(part.grad_atty, G + w.proj_w, G + w.proj_b, d, a.atty, P + w.proj_w, N, C, C,
                                       false);
                        AttentionBackward(part.grad_qkv, part.grad_atty, a.qkv, a.att, B, T, C, H);
                        if (model_.qk_norm) QkNormBackward(part, a, w, G, N);
                        before_last();
                        MatmulBackward(dinput, G + w.qkv_w, G + w.qkv_b, part.grad_qkv, attn_in, P + w.qkv_w, N, C,
                                       3 * C, accumulate);
                      });
  };
  if (norm_in) {
    // res2 = res1 + s2(ln2(res1)); dx = d res2.
    ffn_backward(dx, dtmp, false);
    NormBackward(nk, dx, G + w.ln2_w, G + w.ln2_b, dtmp, a.res1, P + w.ln2_w, a.ln2_mean, a.ln2_rstd, N, C);
    // dx = d res1; res1 = x + s1(ln1(x)).
    attention_backward(dx, dtmp, false);
    NormBackward(nk, dx, G + w.ln1_w, G + w.ln1_b, dtmp, a.x_in, P + w.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
  } else {
    // out = ln2(res2), res2 = alpha ln1_out + ffn(ln1_out), ln1_out = ln1(res1), res1 = alpha x + attn(x).
    std::memset(dtmp, 0, sizeof(float) * NC);
    NormBackward(nk, dtmp, G + w.ln2_w, G + w.ln2_b, dx, a.res2, P + w.ln2_w, a.ln2_mean, a.ln2_rstd, N, C);
    std::swap(dx, dtmp);         // dx = d res2
    ffn_backward(dx, dx, true);  // d ln1_out = alpha d res2 + fc1 backward
    std::memset(dtmp, 0, sizeof(float) * NC);
    NormBackward(nk, dtmp, G + w.ln1_w, G + w.ln1_b, dx, a.res1, P + w.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
    std::swap(dx, dtmp);  // dx = d res1
    attention_backward(dx, dx, true);
  }
}

void CpuBackend::Backward(Part& part, const Batch& batch, Slice s, int64_t count, float* G) {
  const int B = s.b1 - s.b0, T = batch.seq_len, C = model_.d_model;
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const int32_t* inputs = batch.inputs.data() + static_cast<size_t>(s.b0) * T;
  const int32_t* targets = batch.targets.data() + static_cast<size_t>(s.b0) * T;
  const float* P = params_.data();
  const float scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  const NormKind nk = model_.norm;

  // Head: dlogits overwrites probs.
  float* dlogits = part.probs;
  if (options_.z_loss > 0) {
    CrossEntropyZLossBackward(dlogits, part.probs, part.row_log_z, targets, N, kVocabSize, scale,
                              static_cast<float>(options_.z_loss));
  } else {
    CrossEntropyBackward(dlogits, part.probs, targets, N, kVocabSize, scale);
  }
  const float* x0 = layout_.has_emb_ln() ? part.emb_ln_out : part.emb_out;
  const float* last = model_.layers > 0 ? part.blocks.back().out() : x0;
  const float* h = layout_.has_final_ln() ? part.lnf_out : last;
  float* dx = part.grad_res_a;
  float* dtmp = part.grad_res_b;
  MatmulBackward(dx, G + layout_.head_w(), G + layout_.head_b(), dlogits, h, P + layout_.head_w(), N, C,
                 kVocabSize, false);
  if (layout_.has_final_ln()) {
    std::memset(dtmp, 0, sizeof(float) * NC);
    NormBackward(nk, dtmp, G + layout_.lnf_w(), G + layout_.lnf_b(), dx, last, P + layout_.lnf_w(), part.lnf_mean,
                 part.lnf_rstd, N, C);
    std::swap(dx, dtmp);
  }

  // dx holds d(loss)/d(block output) on entry to each iteration.
  for (int l = model_.layers - 1; l >= 0; --l) BlockBackward(part, l, B, T, G, dx, dtmp);
  if (dropout_active_) Multiply(dx, dx, part.emb_mask, NC);
  if (layout_.has_emb_ln()) {
    std::memset(dtmp, 0, sizeof(float) * NC);
    NormBackward(nk, dtmp, G + layout_.lnemb_w(), G + layout_.lnemb_b(), dx, part.emb_out, P + layout_.lnemb_w(),
                 part.emb_ln_mean, part.emb_ln_rstd, N, C);
    std::swap(dx, dtmp);
  }
  float* dpos = nullptr;
  if (layout_.has_pos_emb()) {
    dpos = G + layout_.pos_emb();
    std::memset(dpos, 0, sizeof(float) * static_cast<size_t>(model_.seq_len) * C);
  }
  EncoderBackward(G + layout_.tok_emb(), dpos, dx, inputs, B, T, C, kVocabSize, std::sqrt(static_cast<float>(C)));
}

StatusOr<LossStats> CpuBackend::ForwardBackward(const Batch& batch, uint64_t dropout_seed) {
  TRAINER_RETURN_IF_ERROR(CheckBatch(batch, model_));
  EnsureCapacity(batch.batch_size);
  dropout_active_ = model_.dropout > 0.0f;
  const std::vector<Slice> slices = SplitBatch(batch.batch_size);
  const int parts = static_cast<int>(slices.size());
  // The mean loss divides by the whole batch's target count, which each
  // part's backward needs before the other parts' forward passes are done.
  int64_t count = 0;
  for (int32_t t : batch.targets) count += t >= 0;
  const std::vector<TensorSpec>& tensors = layout_.tensors();
  std::vector<LossStats> part_stats(static_cast<size_t>(parts));
  std::vector<double> sq_partials(tensors.size() * static_cast<size_t>(parts), 0.0);
#pragma omp parallel num_threads(parts)
  {
    // Parts are assigned round robin, so fewer threads than parts (an OpenMP
    // thread limit) still computes the same numbers.
    const int team = omp_get_num_threads(), id = omp_get_thread_num();
    for (int p = id; p < parts; p += team) {
      Part& part = parts_[static_cast<size_t>(p)];
      float* G = p == 0 ? grads_.data() : part.grads.data();
      part_stats[static_cast<size_t>(p)] = Forward(part, batch, slices[static_cast<size_t>(p)], dropout_seed);
      Backward(part, batch, slices[static_cast<size_t>(p)], count, G);
    }
#pragma omp barrier
    // grads_ += the other parts' gradients, in part order, each tensor cut
    // into `parts` ranges; the squared norms are taken on the way.
    for (size_t t = 0; t < tensors.size(); ++t) {
      for (int p = id; p < parts; p += team) {
        const size_t begin = tensors[t].offset + tensors[t].size * p / parts;
        const size_t end = tensors[t].offset + tensors[t].size * (p + 1) / parts;
        float* g = grads_.data() + begin;
        for (int q = 1; q < parts; ++q) {
          const float* gq = parts_[static_cast<size_t>(q)].grads.data() + begin;
          for (size_t i = 0; i < end - begin; ++i) g[i] += gq[i];
        }
        sq_partials[t * parts + p] = SumOfSquares(g, end - begin);
      }
    }
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    double sq = 0.0;
    for (int p = 0; p < parts; ++p) sq += sq_partials[t * parts + p];
    grad_sq_norms_[t] = sq;
  }
  LossStats stats;
  for (const LossStats& s : part_stats) stats += s;
  return stats;
}

StatusOr<LossStats> CpuBackend::Evaluate(const Batch& batch) {
  TRAINER_RETURN_IF_ERROR(CheckBatch(batch, model_));
  EnsureCapacity(batch.batch_size);
  dropout_active_ = false;
  record_attn_max_ = options_.diagnostics;
  const std::vector<Slice> slices = SplitBatch(batch.batch_size);
  const int parts = static_cast<int>(slices.size());
  std::vector<LossStats> part_stats(static_cast<size_t>(parts));
#pragma omp parallel num_threads(parts)
  {
    const int team = omp_get_num_threads(), id = omp_get_thread_num();
    for (int p = id; p < parts; p += team) {
      part_stats[static_cast<size_t>(p)] =
          Forward(parts_[static_cast<size_t>(p)], batch, slices[static_cast<size_t>(p)], 0);
    }
  }
  if (record_attn_max_) {
    for (int p = 0; p < parts; ++p) {
      std::vector<float>& block_max = parts_[static_cast<size_t>(p)].block_max;
      for (size_t l = 0; l < block_max.size(); ++l) {
        max_attn_logit_[l] = std::max(max_attn_logit_[l], static_cast<double>(block_max[l]));
        block_max[l] = -INFINITY;
      }
    }
    record_attn_max_ = false;
  }
  LossStats stats;
  for (const LossStats& s : part_stats) stats += s;
  return stats;
}

StatusOr<std::vector<double>> CpuBackend::TakeMaxAttentionLogits() {
  std::vector<double> out = max_attn_logit_;
  std::fill(max_attn_logit_.begin(), max_attn_logit_.end(), -INFINITY);
  return out;
}

StatusOr<std::vector<double>> CpuBackend::GradientSquaredNorms() { return grad_sq_norms_; }

StatusOr<UpdateSquaredNorms> CpuBackend::LastUpdateSquaredNorms() {
  if (!update_measured_) return Internal("no optimizer step measured its update");
  return update_sq_;
}

Status CpuBackend::OptimizerStep(const OptimizerStepArgs& args) {
  if (args.measure_update) weights_before_ = params_;
  // One parallel region over the flat buffers: each thread updates a
  // contiguous range, tensor by tensor (weight decay is per tensor). The
  // update is elementwise, so the ranges do not change the result.
  const std::vector<TensorSpec>& tensors = layout_.tensors();
  const size_t total = layout_.total();
#pragma omp parallel if (total >= (1u << 14))
  {
    const size_t threads = static_cast<size_t>(omp_get_num_threads());
    const size_t id = static_cast<size_t>(omp_get_thread_num());
    const size_t chunk = (total + threads - 1) / threads;
    const size_t begin = std::min(total, id * chunk), end = std::min(total, begin + chunk);
    for (const TensorSpec& t : tensors) {
      const size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.size);
      if (hi <= lo) continue;
      const double wd = t.decay ? options_.optimizer.weight_decay : 0.0;
      OptimizerUpdate(options_.optimizer, args, wd, params_.data() + lo, grads_.data() + lo, m_.data() + lo,
                      v_.data() + lo, hi - lo);
    }
  }
  if (args.measure_update) MeasureUpdate();
  return OkStatus();
}

void CpuBackend::MeasureUpdate() {
  // Per tensor: sum (after - before)^2 and sum before^2, in double; in
  // weights_before_ the update overwrites the weights it is measured against.
  const std::vector<TensorSpec>& tensors = layout_.tensors();
  update_sq_.update.assign(tensors.size(), 0.0);
  update_sq_.weight.assign(tensors.size(), 0.0);
  for (size_t t = 0; t < tensors.size(); ++t) {
    float* before = weights_before_.data() + tensors[t].offset;
    const float* after = params_.data() + tensors[t].offset;
    update_sq_.weight[t] = SumOfSquares(before, tensors[t].size);
    for (size_t i = 0; i < tensors[t].size; ++i) before[i] = after[i] - before[i];
    update_sq_.update[t] = SumOfSquares(before, tensors[t].size);
  }
  update_measured_ = true;
}

}  // namespace normsweep::trainer::cpu
