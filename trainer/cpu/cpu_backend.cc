#include "trainer/cpu/cpu_backend.h"

#include <omp.h>

#include <cmath>
#include <cstring>

#include "trainer/cpu/ops.h"
#include "trainer/optimizer.h"
#include "trainer/rng.h"

namespace normsweep::trainer::cpu {
namespace {
constexpr float kLayerNormEps = 1e-5f;
}  // namespace

const float* CpuBackend::BlockActivations::out() const { return pre_ln ? res2 : ln2_out; }

StatusOr<std::unique_ptr<Backend>> CpuBackend::Create(const BackendOptions& options) {
  TRAINER_RETURN_IF_ERROR(ValidateModelConfig(options.model));
  if (options.threads < 1) return InvalidArgument("threads: must be >= 1");
  if (options.precision != Precision::kFp32) {
    return InvalidArgument(std::string("precision: ") + PrecisionName(options.precision) +
                           " needs a CUDA device; the cpu backend computes in fp32");
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
  sin_pos_.assign(static_cast<size_t>(model_.seq_len) * model_.d_model, 0.0f);
  SinusoidalPositions(sin_pos_.data(), model_.seq_len, model_.d_model);
  EnsureCapacity(std::max(1, options.max_batch_size));
}

void CpuBackend::EnsureCapacity(int B) {
  if (B <= capacity_b_) return;
  const size_t N = static_cast<size_t>(B) * model_.seq_len;
  const size_t C = model_.d_model, F = model_.d_ff, H = model_.heads, T = model_.seq_len;
  const bool dropout = model_.dropout > 0.0f;
  // Lay out every buffer in one arena.
  std::vector<std::pair<float**, size_t>> plan;
  plan.push_back({&emb_out_, N * C});
  if (dropout) plan.push_back({&emb_mask_, N * C});
  blocks_.assign(static_cast<size_t>(model_.layers), BlockActivations{});
  for (BlockActivations& a : blocks_) {
    a.pre_ln = model_.placement == Placement::kPreLN;
    plan.push_back({&a.ln1_out, N * C});
    plan.push_back({&a.ln1_mean, N});
    plan.push_back({&a.ln1_rstd, N});
    plan.push_back({&a.qkv, N * 3 * C});
    plan.push_back({&a.att, static_cast<size_t>(B) * H * T * T});
    plan.push_back({&a.atty, N * C});
    plan.push_back({&a.attn_out, N * C});
    plan.push_back({&a.res1, N * C});
    plan.push_back({&a.ln2_out, N * C});
    plan.push_back({&a.ln2_mean, N});
    plan.push_back({&a.ln2_rstd, N});
    plan.push_back({&a.fc1_act, N * F});
    plan.push_back({&a.ffn_out, N * C});
    plan.push_back({&a.res2, N * C});
    if (dropout) {
      plan.push_back({&a.attn_mask, N * C});
      plan.push_back({&a.ffn_mask, N * C});
    } else {
      a.attn_mask = a.ffn_mask = nullptr;
    }
  }
  plan.push_back({&lnf_out_, N * C});
  plan.push_back({&lnf_mean_, N});
  plan.push_back({&lnf_rstd_, N});
  plan.push_back({&logits_, N * kVocabSize});
  plan.push_back({&probs_, N * kVocabSize});
  plan.push_back({&row_loss_, N});
  plan.push_back({&d_a_, N * C});
  plan.push_back({&d_b_, N * C});
  plan.push_back({&d_c_, N * C});
  plan.push_back({&d_d_, N * C});
  plan.push_back({&d_qkv_, N * 3 * C});
  plan.push_back({&d_act_, N * F});
  size_t total = 0;
  for (auto& [ptr, n] : plan) total += (n + 15) & ~size_t{15};  // 64-byte aligned chunks
  arena_.assign(total + 16, 0.0f);
  float* base = arena_.data();
  while (reinterpret_cast<uintptr_t>(base) % 64 != 0) ++base;
  for (auto& [ptr, n] : plan) {
    *ptr = base;
    base += (n + 15) & ~size_t{15};
  }
  capacity_b_ = B;
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

LossStats CpuBackend::Forward(const Batch& batch, bool training, uint64_t dropout_seed) {
  const int B = batch.batch_size, T = batch.seq_len, C = model_.d_model, F = model_.d_ff, H = model_.heads;
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_.data();
  dropout_active_ = training && model_.dropout > 0.0f;
  const float p_drop = model_.dropout;

  const float* pos = layout_.has_pos_emb() ? P + layout_.pos_emb() : sin_pos_.data();
  EncoderForward(emb_out_, batch.inputs.data(), P + layout_.tok_emb(), pos, B, T, C,
                 std::sqrt(static_cast<float>(C)));
  if (dropout_active_) {
    MakeDropoutMask(emb_mask_, NC, p_drop, MixSeed(dropout_seed, 0));
    Multiply(emb_out_, emb_out_, emb_mask_, NC);
  }

  const float* x = emb_out_;
  for (int l = 0; l < model_.layers; ++l) {
    BlockActivations& a = blocks_[static_cast<size_t>(l)];
    const BlockOffsets& w = layout_.blocks()[static_cast<size_t>(l)];
    a.x_in = const_cast<float*>(x);
    const bool pre = a.pre_ln;
    // Attention sublayer.
    const float* attn_in = x;
    if (pre) {
      LayerNormForward(a.ln1_out, a.ln1_mean, a.ln1_rstd, x, P + w.ln1_w, P + w.ln1_b, N, C, kLayerNormEps);
      attn_in = a.ln1_out;
    }
    MatmulForward(a.qkv, attn_in, P + w.qkv_w, P + w.qkv_b, N, C, 3 * C);
    AttentionForward(a.atty, a.att, a.qkv, B, T, C, H);
    MatmulForward(a.attn_out, a.atty, P + w.proj_w, P + w.proj_b, N, C, C);
    if (dropout_active_) {
      MakeDropoutMask(a.attn_mask, NC, p_drop, MixSeed(dropout_seed, 2 * l + 1));
      Multiply(a.attn_out, a.attn_out, a.attn_mask, NC);
    }
    Add(a.res1, x, a.attn_out, NC);
    // FFN sublayer.
    const float* ffn_in;
    if (pre) {
      LayerNormForward(a.ln2_out, a.ln2_mean, a.ln2_rstd, a.res1, P + w.ln2_w, P + w.ln2_b, N, C,
                       kLayerNormEps);
      ffn_in = a.ln2_out;
    } else {
      LayerNormForward(a.ln1_out, a.ln1_mean, a.ln1_rstd, a.res1, P + w.ln1_w, P + w.ln1_b, N, C,
                       kLayerNormEps);
      ffn_in = a.ln1_out;
    }
    MatmulForward(a.fc1_act, ffn_in, P + w.fc1_w, P + w.fc1_b, N, C, F);
    ReluForward(a.fc1_act, static_cast<size_t>(N) * F);
    MatmulForward(a.ffn_out, a.fc1_act, P + w.fc2_w, P + w.fc2_b, N, F, C);
    if (dropout_active_) {
      MakeDropoutMask(a.ffn_mask, NC, p_drop, MixSeed(dropout_seed, 2 * l + 2));
      Multiply(a.ffn_out, a.ffn_out, a.ffn_mask, NC);
    }
    Add(a.res2, pre ? a.res1 : a.ln1_out, a.ffn_out, NC);
    if (!pre) {
      LayerNormForward(a.ln2_out, a.ln2_mean, a.ln2_rstd, a.res2, P + w.ln2_w, P + w.ln2_b, N, C,
                       kLayerNormEps);
    }
    x = a.out();
  }
  const float* h = x;
  if (layout_.has_final_ln()) {
    LayerNormForward(lnf_out_, lnf_mean_, lnf_rstd_, x, P + layout_.lnf_w(), P + layout_.lnf_b(), N, C,
                     kLayerNormEps);
    h = lnf_out_;
  }
  MatmulForward(logits_, h, P + layout_.head_w(), P + layout_.head_b(), N, C, kVocabSize);
  CrossEntropyStats ce = CrossEntropyForward(probs_, row_loss_, logits_, batch.targets.data(), N, kVocabSize);
  LossStats stats;
  stats.loss_sum = ce.loss_sum;
  stats.count = ce.count;
  stats.correct = ce.correct;
  return stats;
}

void CpuBackend::Backward(const Batch& batch, int64_t count) {
  const int B = batch.batch_size, T = batch.seq_len, C = model_.d_model, F = model_.d_ff, H = model_.heads;
  const int N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_.data();
  float* G = grads_.data();
  const float scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;

  // Head: dlogits overwrites probs.
  float* dlogits = probs_;
  CrossEntropyBackward(dlogits, probs_, batch.targets.data(), N, kVocabSize, scale);
  const float* last = model_.layers > 0 ? blocks_.back().out() : emb_out_;
  const float* h = layout_.has_final_ln() ? lnf_out_ : last;
  float* dx = d_a_;
  float* dtmp = d_b_;
  MatmulBackward(dx, G + layout_.head_w(), G + layout_.head_b(), dlogits, h, P + layout_.head_w(), N, C,
                 kVocabSize, false);
  if (layout_.has_final_ln()) {
    std::memset(dtmp, 0, sizeof(float) * NC);
    LayerNormBackward(dtmp, G + layout_.lnf_w(), G + layout_.lnf_b(), dx, last, P + layout_.lnf_w(),
                      lnf_mean_, lnf_rstd_, N, C);
    std::swap(dx, dtmp);
  }

  // dx holds d(loss)/d(block output) on entry to each iteration.
  for (int l = model_.layers - 1; l >= 0; --l) {
    BlockActivations& a = blocks_[static_cast<size_t>(l)];
    const BlockOffsets& w = layout_.blocks()[static_cast<size_t>(l)];
    const float* attn_in = a.pre_ln ? a.ln1_out : a.x_in;
    const float* ffn_in = a.pre_ln ? a.ln2_out : a.ln1_out;
    // The two sublayers' backward passes, shared by both placements: from the
    // gradient of the sublayer's output to its input's, written (or added,
    // with accumulate) into dinput. dout is read before dinput is written.
    auto ffn_backward = [&](const float* dout, float* dinput, bool accumulate) {
      if (dropout_active_) {
        Multiply(d_c_, dout, a.ffn_mask, NC);
        dout = d_c_;
      }
      MatmulBackward(d_act_, G + w.fc2_w, G + w.fc2_b, dout, a.fc1_act, P + w.fc2_w, N, F, C, false);
      ReluBackward(d_act_, d_act_, a.fc1_act, static_cast<size_t>(N) * F);
      MatmulBackward(dinput, G + w.fc1_w, G + w.fc1_b, d_act_, ffn_in, P + w.fc1_w, N, C, F, accumulate);
    };
    auto attention_backward = [&](const float* dout, float* dinput, bool accumulate) {
      if (dropout_active_) {
        Multiply(d_c_, dout, a.attn_mask, NC);
        dout = d_c_;
      }
      MatmulBackward(d_d_, G + w.proj_w, G + w.proj_b, dout, a.atty, P + w.proj_w, N, C, C, false);
      AttentionBackward(d_qkv_, d_d_, a.qkv, a.att, B, T, C, H);
      MatmulBackward(dinput, G + w.qkv_w, G + w.qkv_b, d_qkv_, attn_in, P + w.qkv_w, N, C, 3 * C, accumulate);
    };
    if (a.pre_ln) {
      // res2 = res1 + ffn(ln2(res1)); dx = d res2.
      ffn_backward(dx, dtmp, false);
      LayerNormBackward(dx, G + w.ln2_w, G + w.ln2_b, dtmp, a.res1, P + w.ln2_w, a.ln2_mean, a.ln2_rstd, N, C);
      // dx = d res1; res1 = x + attn(ln1(x)).
      attention_backward(dx, dtmp, false);
      LayerNormBackward(dx, G + w.ln1_w, G + w.ln1_b, dtmp, a.x_in, P + w.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
    } else {
      // out = ln2(res2), res2 = ln1_out + ffn(ln1_out), ln1_out = ln1(res1), res1 = x + attn(x).
      std::memset(dtmp, 0, sizeof(float) * NC);
      LayerNormBackward(dtmp, G + w.ln2_w, G + w.ln2_b, dx, a.res2, P + w.ln2_w, a.ln2_mean, a.ln2_rstd, N, C);
      std::swap(dx, dtmp);       // dx = d res2
      ffn_backward(dx, dx, true);  // d ln1_out = d res2 + fc1 backward
      std::memset(dtmp, 0, sizeof(float) * NC);
      LayerNormBackward(dtmp, G + w.ln1_w, G + w.ln1_b, dx, a.res1, P + w.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
      std::swap(dx, dtmp);  // dx = d res1
      attention_backward(dx, dx, true);
    }
  }
  if (dropout_active_) Multiply(dx, dx, emb_mask_, NC);
  float* dpos = nullptr;
  if (layout_.has_pos_emb()) {
    dpos = G + layout_.pos_emb();
    std::memset(dpos, 0, sizeof(float) * static_cast<size_t>(model_.seq_len) * C);
  }
  EncoderBackward(G + layout_.tok_emb(), dpos, dx, batch.inputs.data(), B, T, C, kVocabSize,
                  std::sqrt(static_cast<float>(C)));
}

StatusOr<LossStats> CpuBackend::ForwardBackward(const Batch& batch, uint64_t dropout_seed) {
  TRAINER_RETURN_IF_ERROR(CheckBatch(batch, model_));
  EnsureCapacity(batch.batch_size);
  LossStats stats = Forward(batch, /*training=*/true, dropout_seed);
  Backward(batch, stats.count);
  return stats;
}

StatusOr<LossStats> CpuBackend::Evaluate(const Batch& batch) {
  TRAINER_RETURN_IF_ERROR(CheckBatch(batch, model_));
  EnsureCapacity(batch.batch_size);
  return Forward(batch, /*training=*/false, 0);
}

StatusOr<std::vector<double>> CpuBackend::GradientSquaredNorms() {
  std::vector<double> norms;
  norms.reserve(layout_.tensors().size());
  for (const TensorSpec& t : layout_.tensors()) norms.push_back(SquaredNorm(grads_.data() + t.offset, t.size));
  return norms;
}

Status CpuBackend::OptimizerStep(const OptimizerStepArgs& args) {
  for (const TensorSpec& t : layout_.tensors()) {
    const double wd = t.decay ? options_.optimizer.weight_decay : 0.0;
#pragma omp parallel if (t.size >= (1u << 14))
    {
      const size_t threads = static_cast<size_t>(omp_get_num_threads());
      const size_t id = static_cast<size_t>(omp_get_thread_num());
      const size_t chunk = (t.size + threads - 1) / threads;
      const size_t begin = std::min(t.size, id * chunk), end = std::min(t.size, begin + chunk);
      if (end > begin) {
        const size_t o = t.offset + begin;
        OptimizerUpdate(options_.optimizer, args, wd, params_.data() + o, grads_.data() + o, m_.data() + o,
                        v_.data() + o, end - begin);
      }
    }
  }
  return OkStatus();
}

}  // namespace normsweep::trainer::cpu
