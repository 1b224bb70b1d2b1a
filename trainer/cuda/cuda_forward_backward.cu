// CudaBackend's passes (trainer/cuda/cuda_backend_impl.cuh): the block
// program (trainer/program/block_program.h) over this backend's ops, every
// matrix product through cuBLAS (strided-batched for attention), the rest
// through our kernels (trainer/cuda/kernels.cuh), all enqueued on stream_.
// N = B*T rows, C = d_model, H heads, hd = C/H, V = vocabulary; row-major
// arrays, as in trainer/cpu/ops.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "trainer/cuda/cuda_backend_impl.cuh"
#include "trainer/cuda/kernels.cuh"
#include "trainer/program/block_program.h"

namespace normsweep::trainer::cuda {
namespace {

constexpr float kLayerNormEps = 1e-5f;

cublasComputeType_t ComputeType(Precision p) {
  switch (p) {
    case Precision::kTf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Precision::kBf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case Precision::kFp32: break;
  }
  return CUBLAS_COMPUTE_32F;
}

// rows rows of width floats from src to dst, rows strides in floats (a
// sub-matrix such as q's third of qkv, (N,3C) -> (N,C), or back).
cudaError_t CopyRows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows, int width,
                     cudaStream_t s) {
  return cudaMemcpy2DAsync(dst, dst_stride * sizeof(float), src, src_stride * sizeof(float), width * sizeof(float),
                           static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, s);
}

}  // namespace

Status CudaBackend::Gemm(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                         float* C, int ldc, float beta, int batch, long long sa, long long sb, long long sc,
                         bool exact_fp32) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  const float alpha = 1.0f;
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasComputeType_t compute = exact_fp32 ? CUBLAS_COMPUTE_32F : ComputeType(options_.precision);
  if (batch == 1) {
    CUBLAS_RETURN_IF_ERROR(cublasGemmEx(cublas_, opb, opa, N, M, K, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda,
                                        &beta, C, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT));
  } else {
    CUBLAS_RETURN_IF_ERROR(cublasGemmStridedBatchedEx(cublas_, opb, opa, N, M, K, &alpha, B, CUDA_R_32F, ldb, sb, A,
                                                      CUDA_R_32F, lda, sa, &beta, C, CUDA_R_32F, ldc, sc, batch,
                                                      compute, CUBLAS_GEMM_DEFAULT));
  }
  return OkStatus();
}

// The ops of the block program (trainer/program/ops.h) on stream_. An op
// after a failed one does nothing; the pass reports the first failure.
class CudaBackend::DeviceOps final : public Ops {
 public:
  // training: a training pass (no attention-logit maxima: the captured step
  // stays free of the evaluation-only diagnostics).
  DeviceOps(CudaBackend& backend, bool training) : b_(backend), training_(training) {}
  const Status& status() const { return status_; }

  void Embed(float* out, const float* tok_emb, const float* pos, int B, int T, int C, float scale) override {
    if (!ok()) return;
    LaunchEncoderForward(out, b_.inputs_, tok_emb, pos, B * T, T, C, scale, b_.stream_);
  }
  void EmbedBackward(float* dtok_emb, float* dpos, const float* dout, int B, int T, int C, float scale) override {
    if (!ok()) return;
    const int N = B * T;
    if (dpos != nullptr) {
      if (!Check("cudaMemsetAsync", cudaMemsetAsync(dpos, 0, sizeof(float) * static_cast<size_t>(T) * C, b_.stream_))) {
        return;
      }
      LaunchPositionGrad(dpos, dout, B, T, C, b_.stream_);
    }
    // Token embedding: onehot^T @ dout, with the one-hot rows in the (now
    // free) logits buffer; in fp32 whatever the precision option, since
    // rounding sqrt(C) and dout to tf32/bf16 would bias this gradient.
    float* onehot = b_.acts_.logits;
    LaunchOneHot(onehot, b_.inputs_, N, kVocabSize, scale, b_.stream_);
    Keep(b_.Gemm(true, false, kVocabSize, C, N, onehot, kVocabSize, dout, C, dtok_emb, C, 0.0f, 1, 0, 0, 0,
                 /*exact_fp32=*/true));
  }
  void Matmul(float* out, const float* inp, const float* w, const float* bias, int N, int I, int O) override {
    if (!ok()) return;
    if (!Keep(b_.Gemm(false, true, N, O, I, inp, I, w, I, out, O, 0.0f))) return;
    LaunchAddBias(out, bias, N, O, b_.stream_);
  }
  void MatmulBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w, int N,
                      int I, int O, bool accumulate) override {
    if (!ok()) return;
    if (dinp != nullptr && !Keep(b_.Gemm(false, false, N, I, O, dout, O, w, I, dinp, I, accumulate ? 1.0f : 0.0f))) {
      return;
    }
    if (!Keep(b_.Gemm(true, false, O, I, N, dout, O, inp, I, dw, I, 0.0f))) return;
    if (db != nullptr) LaunchColumnSums(db, b_.partial_, dout, N, O, b_.stream_);
  }
  void Norm(NormShape s, float* out, NormStats stats, const float* inp, NormWeights w) override {
    if (!ok()) return;
    if (s.kind == NormKind::kRmsNorm) {
      LaunchRmsNormForward(out, stats.rstd, inp, w.w, s.rows, s.width, kLayerNormEps, b_.stream_);
    } else {
      LaunchLayerNormForward(out, stats.mean, stats.rstd, inp, w.w, w.b, s.rows, s.width, kLayerNormEps, b_.stream_);
    }
  }
  void NormBackward(NormShape s, float* dinp, NormGrads g, const float* dout, const float* inp, NormWeights w,
                    NormStats stats) override {
    if (!ok()) return;
    if (s.kind == NormKind::kRmsNorm) {
      LaunchRmsNormInputGrad(dinp, dout, inp, w.w, stats.rstd, s.rows, s.width, b_.stream_);
      LaunchRmsNormParamGrad(g.dw, b_.partial_, dout, inp, stats.rstd, s.rows, s.width, b_.stream_);
    } else {
      LaunchLayerNormInputGrad(dinp, dout, inp, w.w, stats.mean, stats.rstd, s.rows, s.width, b_.stream_);
      LaunchLayerNormParamGrad(g.dw, g.db, b_.partial_, dout, inp, stats.mean, stats.rstd, s.rows, s.width,
                               b_.stream_);
    }
  }
  void QkNorm(const QkNormArgs& a) override {
    // Each token's q (and k) is H contiguous rows of hd in qkv (N,3C): copy
    // them aside to (N*H, hd), normalise the copy into scratch and put the
    // result back.
    const int C = a.C, N = a.N;
    const NormShape rows{a.kind, a.N * a.H, a.C / a.H};
    for (int which = 0; which < 2; ++which) {  // q, then k
      if (!ok()) return;
      float* qkv_part = a.qkv + (which == 0 ? 0 : C);
      float* raw = which == 0 ? a.q_raw : a.k_raw;
      if (!Check("CopyRows", CopyRows(raw, C, qkv_part, 3 * C, N, C, b_.stream_))) return;
      Norm(rows, a.scratch, which == 0 ? a.q : a.k, raw, which == 0 ? a.qw : a.kw);
      Check("CopyRows", CopyRows(qkv_part, 3 * C, a.scratch, C, N, C, b_.stream_));
    }
  }
  void QkNormBackward(const QkNormArgs& a, float* dqkv, NormGrads gq, NormGrads gk) override {
    // The norms' weights are shared by all N*H rows, so their backward runs
    // once over the gathered (N*H, hd) gradient (scratch; its input's in scratch2).
    const int C = a.C, N = a.N;
    const NormShape rows{a.kind, a.N * a.H, a.C / a.H};
    for (int which = 0; which < 2; ++which) {  // q, then k
      if (!ok()) return;
      float* grad_part = dqkv + (which == 0 ? 0 : C);
      if (!Check("CopyRows", CopyRows(a.scratch, C, grad_part, 3 * C, N, C, b_.stream_))) return;
      if (!Check("cudaMemsetAsync", cudaMemsetAsync(a.scratch2, 0, sizeof(float) * N * C, b_.stream_))) return;
      NormBackward(rows, a.scratch2, which == 0 ? gq : gk, a.scratch, which == 0 ? a.q_raw : a.k_raw,
                   which == 0 ? a.qw : a.kw, which == 0 ? a.q : a.k);
      Check("CopyRows", CopyRows(grad_part, 3 * C, a.scratch2, C, N, C, b_.stream_));
    }
  }
  void Attention(int layer, float* out, float* att, const float* qkv, int B, int T, int C, int H) override {
    if (!ok()) return;
    const int hd = C / H, BH = B * H, N = B * T;
    const long long th = static_cast<long long>(T) * hd, tt = static_cast<long long>(T) * T;
    // Evaluation keeps the attention logits' row maxima (not in the captured training step).
    float* row_max = !training_ && b_.options_.diagnostics
                         ? b_.attn_row_max_ + static_cast<size_t>(layer) * H * N
                         : nullptr;
    LaunchSplitHeads(b_.q_, b_.k_, b_.v_heads_, qkv, B, T, H, hd, b_.stream_);
    if (!Keep(b_.Gemm(false, true, T, T, hd, b_.q_, hd, b_.k_, hd, att, T, 0.0f, BH, th, th, tt))) return;
    LaunchCausalSoftmax(att, row_max, BH, T, 1.0f / std::sqrt(static_cast<float>(hd)), b_.stream_);
    if (!Keep(b_.Gemm(false, false, T, hd, T, att, T, b_.v_heads_, hd, b_.y_, hd, 0.0f, BH, tt, th, th))) return;
    LaunchMergeHeads(out, b_.y_, B, T, H, hd, b_.stream_);
  }
  void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int C,
                         int H) override {
    if (!ok()) return;
    const int hd = C / H, BH = B * H;
    const long long th = static_cast<long long>(T) * hd, tt = static_cast<long long>(T) * T;
    cudaStream_t s = b_.stream_;
    LaunchSplitHeads(b_.q_, b_.k_, b_.v_heads_, qkv, B, T, H, hd, s);
    LaunchSplitOutputHeads(b_.y_, dout, B, T, H, hd, s);  // y_ = dy
    if (!Keep(b_.Gemm(false, true, T, T, hd, b_.y_, hd, b_.v_heads_, hd, b_.grad_att_, T, 0.0f, BH, th, th, tt))) {
      return;
    }
    if (!Keep(b_.Gemm(true, false, T, hd, T, att, T, b_.y_, hd, b_.grad_v_, hd, 0.0f, BH, tt, th, th))) return;
    LaunchCausalSoftmaxBackward(b_.grad_att_, att, BH, T, 1.0f / std::sqrt(static_cast<float>(hd)), s);
    if (!Keep(b_.Gemm(false, false, T, hd, T, b_.grad_att_, T, b_.k_, hd, b_.grad_q_, hd, 0.0f, BH, tt, th, th))) {
      return;
    }
    if (!Keep(b_.Gemm(true, false, T, hd, T, b_.grad_att_, T, b_.q_, hd, b_.grad_k_, hd, 0.0f, BH, tt, th, th))) {
      return;
    }
    LaunchMergeQkvHeads(dqkv, b_.grad_q_, b_.grad_k_, b_.grad_v_, B, T, H, hd, s);
  }
  void Relu(float* x, size_t n) override {
    if (ok()) LaunchRelu(x, n, b_.stream_);
  }
  void ReluBackward(float* dx, const float* dy, const float* act, size_t n) override {
    if (!ok()) return;
    if (dx != dy &&
        !Check("cudaMemcpyAsync", cudaMemcpyAsync(dx, dy, sizeof(float) * n, cudaMemcpyDeviceToDevice, b_.stream_))) {
      return;
    }
    LaunchReluBackward(dx, act, n, b_.stream_);
  }
  void Residual(float* out, float a, const float* x, float b, const float* s, size_t n) override {
    if (!ok()) return;
    if (a == 1.0f && b == 1.0f) {
      LaunchAdd(out, x, s, n, b_.stream_);
    } else if (b == 1.0f) {
      LaunchScaledAdd(out, a, x, s, n, b_.stream_);
    } else {
      LaunchScaledSum(out, a, x, b, s, n, b_.stream_);
    }
  }
  void Scale(float* x, float a, size_t n) override {
    if (ok()) LaunchScale(x, a, n, b_.stream_);
  }
  void Zero(float* x, size_t n) override {
    if (ok()) Check("cudaMemsetAsync", cudaMemsetAsync(x, 0, sizeof(float) * n, b_.stream_));
  }
  void Multiply(float* out, const float* x, const float* y, size_t n) override {
    if (ok()) LaunchMultiply(out, x, y, n, b_.stream_);
  }
  void Dropout(float* x, float* mask, size_t n, float p, uint64_t stream) override {
    if (!ok()) return;
    LaunchDropoutMask(mask, n, p, b_.seed_, stream, b_.stream_);
    LaunchMultiply(x, x, mask, n, b_.stream_);
  }
  void CrossEntropy(float* probs, float* row_loss, float* row_log_z, const float* logits, int N, int V) override {
    if (!ok()) return;
    LaunchCrossEntropyForward(probs, row_loss, row_log_z, b_.row_correct_, logits, b_.targets_, N, V, b_.stream_);
  }
  void CrossEntropyBackward(float* dlogits, const float* probs, int N, int V) override {
    if (ok()) LaunchCrossEntropyBackward(dlogits, probs, b_.targets_, N, V, b_.loss_scale_, b_.stream_);
  }
  void CrossEntropyZLossBackward(float* dlogits, const float* probs, const float* row_log_z, int N, int V,
                                 float z_loss) override {
    if (!ok()) return;
    LaunchCrossEntropyZLossBackward(dlogits, probs, row_log_z, b_.targets_, N, V, b_.loss_scale_, z_loss,
                                    b_.stream_);
  }

 private:
  bool ok() const { return status_.ok(); }
  bool Keep(Status s) {
    if (ok() && !s.ok()) static_cast<void>(status_ = std::move(s));
    return ok();
  }
  bool Check(const char* call, cudaError_t e) { return e == cudaSuccess ? ok() : Keep(CudaStatus(call, e)); }

  CudaBackend& b_;
  bool training_;
  Status status_;
};

PassArgs CudaBackend::PassFor(int B, int T, bool training) const {
  PassArgs args;
  args.B = B;
  args.T = T;
  args.params = params_;
  args.grads = grads_;
  args.sin_pos = sin_pos_;
  args.training = training;
  args.z_loss = options_.z_loss;
  return args;
}

Status CudaBackend::EnqueueForward(int B, int T, bool training) {
  DeviceOps ops(*this, training);
  ForwardPass(model_, layout_, ops, acts_, PassFor(B, T, training));
  TRAINER_RETURN_IF_ERROR(ops.status());
  if (!training && options_.diagnostics && model_.layers > 0) {
    LaunchSegmentMax(block_max_, attn_row_max_, model_.layers, model_.heads * B * T, stream_);
  }
  CUDA_RETURN_IF_LAUNCH_FAILED("forward kernels");
  return OkStatus();
}

Status CudaBackend::EnqueueBackward(int B, int T) {
  DeviceOps ops(*this, true);
  BackwardPass(model_, layout_, ops, acts_, PassFor(B, T, true));
  TRAINER_RETURN_IF_ERROR(ops.status());
  CUDA_RETURN_IF_LAUNCH_FAILED("backward kernels");
  return OkStatus();
}

}  // namespace normsweep::trainer::cuda
