#include "trainer/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "trainer/cpu/blas.h"
#include "trainer/cpu/kernel_variant.h"
#include "trainer/cpu/ops.h"
#include "trainer/optimizer.h"
#include "trainer/program/block_program.h"
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
  for (Part& part : parts_) {
    // Lay out every buffer of the part in one arena.
    BufferPlan plan;
    PlanActivations(model_, layout_, per_part, &part.acts, &plan);
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

class CpuBackend::PartOps final : public Ops {
 public:
  // inputs and targets: the part's rows of the batch; mask_first: the
  // part's first element in the whole batch's dropout masks; loss_scale:
  // 1 / the whole batch's target count.
  PartOps(CpuBackend& backend, Part& part, const int32_t* inputs, const int32_t* targets, size_t mask_first,
          uint64_t dropout_seed, float loss_scale)
      : backend_(backend), part_(part), inputs_(inputs), targets_(targets), mask_first_(mask_first),
        dropout_seed_(dropout_seed), loss_scale_(loss_scale) {}

  const CrossEntropyStats& loss() const { return ce_; }

  void Embed(float* out, const float* tok_emb, const float* pos, int B, int T, int C, float scale) override {
    EncoderForward(out, inputs_, tok_emb, pos, B, T, C, scale);
  }
  void EmbedBackward(float* dtok_emb, float* dpos, const float* dout, int B, int T, int C, float scale) override {
    if (dpos != nullptr) std::memset(dpos, 0, sizeof(float) * static_cast<size_t>(T) * C);
    EncoderBackward(dtok_emb, dpos, dout, inputs_, B, T, C, kVocabSize, scale);
  }
  void Matmul(float* out, const float* inp, const float* w, const float* b, int N, int I, int O) override {
    MatmulForward(out, inp, w, b, N, I, O);
  }
  void MatmulBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w, int N,
                      int I, int O, bool accumulate) override {
    cpu::MatmulBackward(dinp, dw, db, dout, inp, w, N, I, O, accumulate);
  }
  void Norm(NormShape s, float* out, NormStats stats, const float* inp, NormWeights w) override {
    NormForward(s.kind, out, stats.mean, stats.rstd, inp, w.w, w.b, s.rows, s.width);
  }
  void NormBackward(NormShape s, float* dinp, NormGrads g, const float* dout, const float* inp, NormWeights w,
                    NormStats stats) override {
    cpu::NormBackward(s.kind, dinp, g.dw, g.db, dout, inp, w.w, stats.mean, stats.rstd, s.rows, s.width);
  }
  void QkNorm(const QkNormArgs& a) override {
    // Each token's q (and k) is H contiguous rows of hd in qkv: copy them
    // aside, then normalise the copy back into qkv, token by token.
    const int C = a.C, H = a.H, hd = a.C / a.H;
    for (int n = 0; n < a.N; ++n) {
      float* q = a.qkv + static_cast<size_t>(n) * 3 * C;
      float* k = q + C;
      float* q_raw = a.q_raw + static_cast<size_t>(n) * C;
      float* k_raw = a.k_raw + static_cast<size_t>(n) * C;
      std::memcpy(q_raw, q, sizeof(float) * C);
      std::memcpy(k_raw, k, sizeof(float) * C);
      NormForward(a.kind, q, a.q.mean + static_cast<size_t>(n) * H, a.q.rstd + static_cast<size_t>(n) * H, q_raw,
                  a.qw.w, a.qw.b, H, hd);
      NormForward(a.kind, k, a.k.mean + static_cast<size_t>(n) * H, a.k.rstd + static_cast<size_t>(n) * H, k_raw,
                  a.kw.w, a.kw.b, H, hd);
    }
  }
  void QkNormBackward(const QkNormArgs& a, float* dqkv, NormGrads gq, NormGrads gk) override {
    // The norms' weights are shared by all N*H rows, so their backward runs
    // once over the gathered (N*H, hd) gradient (in scratch; the input's
    // gradient in scratch2).
    const int C = a.C, H = a.H, hd = a.C / a.H, N = a.N;
    const size_t NC = static_cast<size_t>(N) * C;
    for (int which = 0; which < 2; ++which) {  // q, then k
      const size_t off = which == 0 ? 0 : static_cast<size_t>(C);
      for (int n = 0; n < N; ++n) {
        std::memcpy(a.scratch + static_cast<size_t>(n) * C, dqkv + static_cast<size_t>(n) * 3 * C + off,
                    sizeof(float) * C);
      }
      std::memset(a.scratch2, 0, sizeof(float) * NC);
      if (which == 0) {
        cpu::NormBackward(a.kind, a.scratch2, gq.dw, gq.db, a.scratch, a.q_raw, a.qw.w, a.q.mean, a.q.rstd, N * H,
                          hd);
      } else {
        cpu::NormBackward(a.kind, a.scratch2, gk.dw, gk.db, a.scratch, a.k_raw, a.kw.w, a.k.mean, a.k.rstd, N * H,
                          hd);
      }
      for (int n = 0; n < N; ++n) {
        std::memcpy(dqkv + static_cast<size_t>(n) * 3 * C + off, a.scratch2 + static_cast<size_t>(n) * C,
                    sizeof(float) * C);
      }
    }
  }
  void Attention(int layer, float* out, float* att, const float* qkv, int B, int T, int C, int H) override {
    const bool record = backend_.record_attn_max_;
    AttentionForward(out, att, qkv, B, T, C, H, record ? part_.head_max.data() : nullptr);
    if (record) {
      float& m = part_.block_max[static_cast<size_t>(layer)];
      for (int i = 0; i < B * H; ++i) m = std::max(m, part_.head_max[static_cast<size_t>(i)]);
    }
  }
  void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int C,
                         int H) override {
    cpu::AttentionBackward(dqkv, dout, qkv, att, B, T, C, H);
  }
  void Relu(float* x, size_t n) override { ReluForward(x, n); }
  void ReluBackward(float* dx, const float* dy, const float* act, size_t n) override {
    cpu::ReluBackward(dx, dy, act, n);
  }
  void Residual(float* out, float a, const float* x, float b, const float* s, size_t n) override {
    // In this file, compiled for plain x86-64: no fused multiply-add.
    if (a == 1.0f && b == 1.0f) {
      Add(out, x, s, n);
    } else if (b == 1.0f) {
      for (size_t i = 0; i < n; ++i) out[i] = a * x[i] + s[i];
    } else {
      for (size_t i = 0; i < n; ++i) out[i] = a * x[i] + b * s[i];
    }
  }
  void Scale(float* x, float a, size_t n) override {
    for (size_t i = 0; i < n; ++i) x[i] *= a;
  }
  void Zero(float* x, size_t n) override { std::memset(x, 0, sizeof(float) * n); }
  void Multiply(float* out, const float* x, const float* y, size_t n) override { cpu::Multiply(out, x, y, n); }
  void Dropout(float* x, float* mask, size_t n, float p, uint64_t stream) override {
    // The masks are drawn for the whole batch's rows, so that a part takes
    // its rows' slice of each: the same masks for any thread count.
    MakeDropoutMaskSlice(mask, mask_first_, n, p, MixSeed(dropout_seed_, stream));
    cpu::Multiply(x, x, mask, n);
  }
  void CrossEntropy(float* probs, float* row_loss, float* row_log_z, const float* logits, int N, int V) override {
    ce_ = CrossEntropyForward(probs, row_loss, row_log_z, logits, targets_, N, V);
  }
  void CrossEntropyBackward(float* dlogits, const float* probs, int N, int V) override {
    cpu::CrossEntropyBackward(dlogits, probs, targets_, N, V, loss_scale_);
  }
  void CrossEntropyZLossBackward(float* dlogits, const float* probs, const float* row_log_z, int N, int V,
                                 float z_loss) override {
    cpu::CrossEntropyZLossBackward(dlogits, probs, row_log_z, targets_, N, V, loss_scale_, z_loss);
  }

 private:
  CpuBackend& backend_;
  Part& part_;
  const int32_t* inputs_;
  const int32_t* targets_;
  size_t mask_first_;
  uint64_t dropout_seed_;
  float loss_scale_;
  CrossEntropyStats ce_;
};

LossStats CpuBackend::RunPart(Part& part, const Batch& batch, Slice s, uint64_t dropout_seed, int64_t count,
                              float* G) {
  const int B = s.b1 - s.b0, T = batch.seq_len;
  const float scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  PartOps ops(*this, part, batch.inputs.data() + static_cast<size_t>(s.b0) * T,
              batch.targets.data() + static_cast<size_t>(s.b0) * T, static_cast<size_t>(s.b0) * T * model_.d_model,
              dropout_seed, scale);
  PassArgs args;
  args.B = B;
  args.T = T;
  args.params = params_.data();
  args.grads = G;
  args.sin_pos = sin_pos_.data();
  args.training = training_;
  args.z_loss = options_.z_loss;
  ForwardPass(model_, layout_, ops, part.acts, args);
  const CrossEntropyStats& ce = ops.loss();
  LossStats stats;
  stats.loss_sum = ce.loss_sum;
  stats.count = ce.count;
  stats.correct = ce.correct;
  stats.log_z_sum = ce.log_z_sum;
  stats.log_z_sq_sum = SumOfSquares(part.acts.row_log_z, static_cast<size_t>(B) * T);  // ignored rows hold 0
  if (G != nullptr) BackwardPass(model_, layout_, ops, part.acts, args);
  return stats;
}

StatusOr<LossStats> CpuBackend::ForwardBackward(const Batch& batch, uint64_t dropout_seed) {
  TRAINER_RETURN_IF_ERROR(CheckBatch(batch, model_));
  EnsureCapacity(batch.batch_size);
  training_ = true;
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
      part_stats[static_cast<size_t>(p)] =
          RunPart(part, batch, slices[static_cast<size_t>(p)], dropout_seed, count, G);
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
  training_ = false;
  record_attn_max_ = options_.diagnostics;
  const std::vector<Slice> slices = SplitBatch(batch.batch_size);
  const int parts = static_cast<int>(slices.size());
  std::vector<LossStats> part_stats(static_cast<size_t>(parts));
#pragma omp parallel num_threads(parts)
  {
    const int team = omp_get_num_threads(), id = omp_get_thread_num();
    for (int p = id; p < parts; p += team) {
      part_stats[static_cast<size_t>(p)] =
          RunPart(parts_[static_cast<size_t>(p)], batch, slices[static_cast<size_t>(p)], 0, 0, nullptr);
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
