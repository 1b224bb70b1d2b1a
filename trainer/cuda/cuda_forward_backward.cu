// CudaBackend's passes (trainer/cuda/cuda_backend_impl.cuh): every matrix
// product through cuBLAS (strided-batched for attention), the rest through
// our kernels (trainer/cuda/kernels.cuh), all enqueued on stream_. N = B*T
// rows, C = d_model, F = d_ff, H heads, hd = C/H, V = vocabulary; row-major
// arrays, as in trainer/cpu/ops.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "trainer/activations.h"
#include "trainer/cuda/cuda_backend_impl.cuh"
#include "trainer/cuda/kernels.cuh"

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

Status CudaBackend::MatmulForward(float* out, const float* inp, const float* w, const float* b, int N, int I, int O) {
  TRAINER_RETURN_IF_ERROR(Gemm(false, true, N, O, I, inp, I, w, I, out, O, 0.0f));
  LaunchAddBias(out, b, N, O, stream_);
  return OkStatus();
}

Status CudaBackend::MatmulBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                   const float* w, int N, int I, int O, bool accumulate) {
  if (dinp != nullptr) {
    TRAINER_RETURN_IF_ERROR(Gemm(false, false, N, I, O, dout, O, w, I, dinp, I, accumulate ? 1.0f : 0.0f));
  }
  TRAINER_RETURN_IF_ERROR(Gemm(true, false, O, I, N, dout, O, inp, I, dw, I, 0.0f));
  if (db != nullptr) LaunchColumnSums(db, partial_, dout, N, O, stream_);
  return OkStatus();
}

Status CudaBackend::AttentionForward(BlockActivations& a, int B, int T, float* row_max) {
  const int H = model_.heads, hd = model_.head_dim(), BH = B * H;
  const long long th = static_cast<long long>(T) * hd, tt = static_cast<long long>(T) * T;
  LaunchSplitHeads(q_, k_, v_heads_, a.qkv, B, T, H, hd, stream_);
  TRAINER_RETURN_IF_ERROR(Gemm(false, true, T, T, hd, q_, hd, k_, hd, a.att, T, 0.0f, BH, th, th, tt));
  LaunchCausalSoftmax(a.att, row_max, BH, T, 1.0f / std::sqrt(static_cast<float>(hd)), stream_);
  TRAINER_RETURN_IF_ERROR(Gemm(false, false, T, hd, T, a.att, T, v_heads_, hd, y_, hd, 0.0f, BH, tt, th, th));
  LaunchMergeHeads(a.atty, y_, B, T, H, hd, stream_);
  return OkStatus();
}

Status CudaBackend::AttentionBackward(float* dqkv, const float* datty, const BlockActivations& a, int B, int T) {
  const int H = model_.heads, hd = model_.head_dim(), BH = B * H;
  const long long th = static_cast<long long>(T) * hd, tt = static_cast<long long>(T) * T;
  LaunchSplitHeads(q_, k_, v_heads_, a.qkv, B, T, H, hd, stream_);
  LaunchSplitOutputHeads(y_, datty, B, T, H, hd, stream_);  // y_ = dy
  TRAINER_RETURN_IF_ERROR(Gemm(false, true, T, T, hd, y_, hd, v_heads_, hd, grad_att_, T, 0.0f, BH, th, th, tt));
  TRAINER_RETURN_IF_ERROR(Gemm(true, false, T, hd, T, a.att, T, y_, hd, grad_v_, hd, 0.0f, BH, tt, th, th));
  LaunchCausalSoftmaxBackward(grad_att_, a.att, BH, T, 1.0f / std::sqrt(static_cast<float>(hd)), stream_);
  TRAINER_RETURN_IF_ERROR(Gemm(false, false, T, hd, T, grad_att_, T, k_, hd, grad_q_, hd, 0.0f, BH, tt, th, th));
  TRAINER_RETURN_IF_ERROR(Gemm(true, false, T, hd, T, grad_att_, T, q_, hd, grad_k_, hd, 0.0f, BH, tt, th, th));
  LaunchMergeQkvHeads(dqkv, grad_q_, grad_k_, grad_v_, B, T, H, hd, stream_);
  return OkStatus();
}

void CudaBackend::LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                    const float* w, const float* mean, const float* rstd, int N) {
  const int C = model_.d_model;
  LaunchLayerNormInputGrad(dinp, dout, inp, w, mean, rstd, N, C, stream_);
  LaunchLayerNormParamGrad(dw, db, partial_, dout, inp, mean, rstd, N, C, stream_);
}

Status CudaBackend::EnqueueForward(int B, int T, bool training) {
  const int C = model_.d_model, F = model_.d_ff, N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_;
  dropout_active_ = training && model_.dropout > 0.0f;
  const float p_drop = model_.dropout;

  const float* pos = layout_.has_pos_emb() ? P + layout_.pos_emb() : sin_pos_;
  LaunchEncoderForward(emb_out_, inputs_, P + layout_.tok_emb(), pos, N, T, C, std::sqrt(static_cast<float>(C)),
                       stream_);
  if (dropout_active_) {
    LaunchDropoutMask(emb_mask_, NC, p_drop, seed_, 0, stream_);
    LaunchMultiply(emb_out_, emb_out_, emb_mask_, NC, stream_);
  }
  const float* x = emb_out_;
  for (int l = 0; l < model_.layers; ++l) {
    BlockActivations& a = blocks_[static_cast<size_t>(l)];
    const BlockOffsets& w = layout_.blocks()[static_cast<size_t>(l)];
    a.x_in = const_cast<float*>(x);
    const bool pre = a.pre_ln;
    const float* attn_in = x;
    if (pre) {
      LaunchLayerNormForward(a.ln1_out, a.ln1_mean, a.ln1_rstd, x, P + w.ln1_w, P + w.ln1_b, N, C, kLayerNormEps,
                             stream_);
      attn_in = a.ln1_out;
    }
    TRAINER_RETURN_IF_ERROR(MatmulForward(a.qkv, attn_in, P + w.qkv_w, P + w.qkv_b, N, C, 3 * C));
    // Evaluation keeps the attention logits' row maxima (not in the captured training step).
    float* row_max = !training && options_.diagnostics
                         ? attn_row_max_ + static_cast<size_t>(l) * model_.heads * N
                         : nullptr;
    TRAINER_RETURN_IF_ERROR(AttentionForward(a, B, T, row_max));
    TRAINER_RETURN_IF_ERROR(MatmulForward(a.attn_out, a.atty, P + w.proj_w, P + w.proj_b, N, C, C));
    if (dropout_active_) {
      LaunchDropoutMask(a.attn_mask, NC, p_drop, seed_, static_cast<uint64_t>(2 * l + 1), stream_);
      LaunchMultiply(a.attn_out, a.attn_out, a.attn_mask, NC, stream_);
    }
    LaunchAdd(a.res1, x, a.attn_out, NC, stream_);
    const float* ffn_in;
    if (pre) {
      LaunchLayerNormForward(a.ln2_out, a.ln2_mean, a.ln2_rstd, a.res1, P + w.ln2_w, P + w.ln2_b, N, C,
                             kLayerNormEps, stream_);
      ffn_in = a.ln2_out;
    } else {
      LaunchLayerNormForward(a.ln1_out, a.ln1_mean, a.ln1_rstd, a.res1, P + w.ln1_w, P + w.ln1_b, N, C,
                             kLayerNormEps, stream_);
      ffn_in = a.ln1_out;
    }
    TRAINER_RETURN_IF_ERROR(MatmulForward(a.fc1_act, ffn_in, P + w.fc1_w, P + w.fc1_b, N, C, F));
    LaunchRelu(a.fc1_act, static_cast<size_t>(N) * F, stream_);
    TRAINER_RETURN_IF_ERROR(MatmulForward(a.ffn_out, a.fc1_act, P + w.fc2_w, P + w.fc2_b, N, F, C));
    if (dropout_active_) {
      LaunchDropoutMask(a.ffn_mask, NC, p_drop, seed_, static_cast<uint64_t>(2 * l + 2), stream_);
      LaunchMultiply(a.ffn_out, a.ffn_out, a.ffn_mask, NC, stream_);
    }
    LaunchAdd(a.res2, pre ? a.res1 : a.ln1_out, a.ffn_out, NC, stream_);
    if (!pre) {
      LaunchLayerNormForward(a.ln2_out, a.ln2_mean, a.ln2_rstd, a.res2, P + w.ln2_w, P + w.ln2_b, N, C,
                             kLayerNormEps, stream_);
    }
    x = a.out();
  }
  const float* h = x;
  if (layout_.has_final_ln()) {
    LaunchLayerNormForward(lnf_out_, lnf_mean_, lnf_rstd_, x, P + layout_.lnf_w(), P + layout_.lnf_b(), N, C,
                           kLayerNormEps, stream_);
    h = lnf_out_;
  }
  TRAINER_RETURN_IF_ERROR(MatmulForward(logits_, h, P + layout_.head_w(), P + layout_.head_b(), N, C, kVocabSize));
  LaunchCrossEntropyForward(probs_, row_loss_, row_log_z_, row_correct_, logits_, targets_, N, kVocabSize,
                            stream_);
  if (!training && options_.diagnostics && model_.layers > 0) {
    LaunchSegmentMax(block_max_, attn_row_max_, model_.layers, model_.heads * N, stream_);
  }
  CUDA_RETURN_IF_LAUNCH_FAILED("forward kernels");
  return OkStatus();
}

Status CudaBackend::EnqueueBackward(int B, int T) {
  const int C = model_.d_model, F = model_.d_ff, N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_;
  float* G = grads_;

  float* dlogits = probs_;
  LaunchCrossEntropyBackward(dlogits, probs_, targets_, N, kVocabSize, loss_scale_, stream_);
  const float* last = model_.layers > 0 ? blocks_.back().out() : emb_out_;
  const float* h = layout_.has_final_ln() ? lnf_out_ : last;
  float* dx = grad_res_a_;
  float* dtmp = grad_res_b_;
  TRAINER_RETURN_IF_ERROR(MatmulBackward(dx, G + layout_.head_w(), G + layout_.head_b(), dlogits, h,
                                         P + layout_.head_w(), N, C, kVocabSize, false));
  if (layout_.has_final_ln()) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dtmp, 0, sizeof(float) * NC, stream_));
    LayerNormBackward(dtmp, G + layout_.lnf_w(), G + layout_.lnf_b(), dx, last, P + layout_.lnf_w(), lnf_mean_,
                      lnf_rstd_, N);
    std::swap(dx, dtmp);
  }

  for (int l = model_.layers - 1; l >= 0; --l) {
    BlockActivations& a = blocks_[static_cast<size_t>(l)];
    const BlockOffsets& w = layout_.blocks()[static_cast<size_t>(l)];
    const float* attn_in = a.pre_ln ? a.ln1_out : a.x_in;
    const float* ffn_in = a.pre_ln ? a.ln2_out : a.ln1_out;
    auto ffn_backward = [&](const float* dout, float* dinput, bool accumulate) -> Status {
      if (dropout_active_) {
        LaunchMultiply(grad_masked_, dout, a.ffn_mask, NC, stream_);
        dout = grad_masked_;
      }
      TRAINER_RETURN_IF_ERROR(
          MatmulBackward(grad_fc1_act_, G + w.fc2_w, G + w.fc2_b, dout, a.fc1_act, P + w.fc2_w, N, F, C, false));
      LaunchReluBackward(grad_fc1_act_, a.fc1_act, static_cast<size_t>(N) * F, stream_);
      return MatmulBackward(dinput, G + w.fc1_w, G + w.fc1_b, grad_fc1_act_, ffn_in, P + w.fc1_w, N, C, F, accumulate);
    };
    auto attention_backward = [&](const float* dout, float* dinput, bool accumulate) -> Status {
      if (dropout_active_) {
        LaunchMultiply(grad_masked_, dout, a.attn_mask, NC, stream_);
        dout = grad_masked_;
      }
      TRAINER_RETURN_IF_ERROR(
          MatmulBackward(grad_atty_, G + w.proj_w, G + w.proj_b, dout, a.atty, P + w.proj_w, N, C, C, false));
      TRAINER_RETURN_IF_ERROR(AttentionBackward(grad_qkv_, grad_atty_, a, B, T));
      return MatmulBackward(dinput, G + w.qkv_w, G + w.qkv_b, grad_qkv_, attn_in, P + w.qkv_w, N, C, 3 * C,
                            accumulate);
    };
    if (a.pre_ln) {
      TRAINER_RETURN_IF_ERROR(ffn_backward(dx, dtmp, false));
      // dx = d res2 = d res1 (residual) + LayerNorm backward of dtmp.
      LayerNormBackward(dx, G + w.ln2_w, G + w.ln2_b, dtmp, a.res1, P + w.ln2_w, a.ln2_mean, a.ln2_rstd, N);
      TRAINER_RETURN_IF_ERROR(attention_backward(dx, dtmp, false));
      LayerNormBackward(dx, G + w.ln1_w, G + w.ln1_b, dtmp, a.x_in, P + w.ln1_w, a.ln1_mean, a.ln1_rstd, N);
    } else {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dtmp, 0, sizeof(float) * NC, stream_));
      LayerNormBackward(dtmp, G + w.ln2_w, G + w.ln2_b, dx, a.res2, P + w.ln2_w, a.ln2_mean, a.ln2_rstd, N);
      std::swap(dx, dtmp);
      TRAINER_RETURN_IF_ERROR(ffn_backward(dx, dx, true));
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dtmp, 0, sizeof(float) * NC, stream_));
      LayerNormBackward(dtmp, G + w.ln1_w, G + w.ln1_b, dx, a.res1, P + w.ln1_w, a.ln1_mean, a.ln1_rstd, N);
      std::swap(dx, dtmp);
      TRAINER_RETURN_IF_ERROR(attention_backward(dx, dx, true));
    }
  }
  if (dropout_active_) LaunchMultiply(dx, dx, emb_mask_, NC, stream_);
  if (layout_.has_pos_emb()) {
    float* dpos = G + layout_.pos_emb();
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dpos, 0, sizeof(float) * static_cast<size_t>(model_.seq_len) * C, stream_));
    LaunchPositionGrad(dpos, dx, B, T, C, stream_);
  }
  // Token embedding: onehot^T @ dx, with the one-hot rows in the (now free)
  // logits buffer; in fp32 whatever the precision option, since rounding
  // sqrt(C) and dx to tf32/bf16 would bias this gradient.
  float* onehot = logits_;
  LaunchOneHot(onehot, inputs_, N, kVocabSize, std::sqrt(static_cast<float>(C)), stream_);
  TRAINER_RETURN_IF_ERROR(Gemm(true, false, kVocabSize, C, N, onehot, kVocabSize, dx, C, G + layout_.tok_emb(), C,
                               0.0f, 1, 0, 0, 0, /*exact_fp32=*/true));
  CUDA_RETURN_IF_LAUNCH_FAILED("backward kernels");
  return OkStatus();
}

}  // namespace normsweep::trainer::cuda
