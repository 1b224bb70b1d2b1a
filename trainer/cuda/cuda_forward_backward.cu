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

void CudaBackend::NormForward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                              int N, int C) {
  if (model_.norm == NormKind::kRmsNorm) {
    LaunchRmsNormForward(out, rstd, inp, w, N, C, kLayerNormEps, stream_);
  } else {
    LaunchLayerNormForward(out, mean, rstd, inp, w, b, N, C, kLayerNormEps, stream_);
  }
}

void CudaBackend::NormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                               const float* mean, const float* rstd, int N, int C) {
  if (model_.norm == NormKind::kRmsNorm) {
    LaunchRmsNormInputGrad(dinp, dout, inp, w, rstd, N, C, stream_);
    LaunchRmsNormParamGrad(dw, partial_, dout, inp, rstd, N, C, stream_);
  } else {
    LaunchLayerNormInputGrad(dinp, dout, inp, w, mean, rstd, N, C, stream_);
    LaunchLayerNormParamGrad(dw, db, partial_, dout, inp, mean, rstd, N, C, stream_);
  }
}

Status CudaBackend::QkNormForward(BlockActivations& a, const BlockOffsets& w, int N) {
  // Each token's q (and k) is H contiguous rows of hd in qkv (N,3C): copy
  // them aside to (N*H, hd), normalise the copy and put the result back.
  const int C = model_.d_model, H = model_.heads, hd = model_.head_dim();
  const float* P = params_;
  for (int which = 0; which < 2; ++which) {  // q, then k
    float* qkv_part = a.qkv + (which == 0 ? 0 : C);
    float* raw = which == 0 ? a.q_raw : a.k_raw;
    const size_t nw = which == 0 ? w.qn_w : w.kn_w, nb = which == 0 ? w.qn_b : w.kn_b;
    CUDA_RETURN_IF_ERROR(CopyRows(raw, C, qkv_part, 3 * C, N, C, stream_));
    NormForward(qk_scratch_, which == 0 ? a.q_mean : a.k_mean, which == 0 ? a.q_rstd : a.k_rstd, raw, P + nw,
                P + nb, N * H, hd);
    CUDA_RETURN_IF_ERROR(CopyRows(qkv_part, 3 * C, qk_scratch_, C, N, C, stream_));
  }
  return OkStatus();
}

Status CudaBackend::QkNormBackward(const BlockActivations& a, const BlockOffsets& w, int N) {
  // The norms' weights are shared by all N*H rows, so their backward runs
  // once over the gathered (N*H, hd) gradient.
  const int C = model_.d_model, H = model_.heads, hd = model_.head_dim();
  const float* P = params_;
  float* G = grads_;
  for (int which = 0; which < 2; ++which) {  // q, then k
    float* grad_part = grad_qkv_ + (which == 0 ? 0 : C);
    const size_t nw = which == 0 ? w.qn_w : w.kn_w, nb = which == 0 ? w.qn_b : w.kn_b;
    CUDA_RETURN_IF_ERROR(CopyRows(qk_scratch_, C, grad_part, 3 * C, N, C, stream_));
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grad_qk_raw_, 0, sizeof(float) * N * C, stream_));
    NormBackward(grad_qk_raw_, G + nw, G + nb, qk_scratch_, which == 0 ? a.q_raw : a.k_raw, P + nw,
                 which == 0 ? a.q_mean : a.k_mean, which == 0 ? a.q_rstd : a.k_rstd, N * H, hd);
    CUDA_RETURN_IF_ERROR(CopyRows(grad_part, 3 * C, grad_qk_raw_, C, N, C, stream_));
  }
  return OkStatus();
}

StatusOr<const float*> CudaBackend::BlockForward(int l, const float* x, int B, int T, bool training) {
  const int C = model_.d_model, F = model_.d_ff, N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_;
  const float p_drop = model_.dropout;
  const float alpha = static_cast<float>(model_.ResidualAlpha());
  BlockActivations& a = blocks_[static_cast<size_t>(l)];
  const BlockOffsets& w = layout_.blocks()[static_cast<size_t>(l)];
  a.x_in = const_cast<float*>(x);
  // Pre-LN and Peri-LN normalise each sublayer's input; Post-LN and
  // DeepNorm the residual sum; Peri-LN also the sublayer's output.
  const bool norm_in = !a.norm_after_residual();
  const bool peri = a.kind == Placement::kPeriLN;
  // out = alpha * in + s (DeepNorm's residual; a plain add when alpha is 1).
  auto residual = [&](float* out, const float* in, const float* s) {
    if (alpha == 1.0f) {
      LaunchAdd(out, in, s, NC, stream_);
    } else {
      LaunchScaledAdd(out, alpha, in, s, NC, stream_);
    }
  };
  // Attention sublayer.
  const float* attn_in = x;
  if (norm_in) {
    NormForward(a.ln1_out, a.ln1_mean, a.ln1_rstd, x, P + w.ln1_w, P + w.ln1_b, N, C);
    attn_in = a.ln1_out;
  }
  TRAINER_RETURN_IF_ERROR(MatmulForward(a.qkv, attn_in, P + w.qkv_w, P + w.qkv_b, N, C, 3 * C));
  if (model_.qk_norm) TRAINER_RETURN_IF_ERROR(QkNormForward(a, w, N));
  // Evaluation keeps the attention logits' row maxima (not in the captured training step).
  float* row_max =
      !training && options_.diagnostics ? attn_row_max_ + static_cast<size_t>(l) * model_.heads * N : nullptr;
  TRAINER_RETURN_IF_ERROR(AttentionForward(a, B, T, row_max));
  TRAINER_RETURN_IF_ERROR(MatmulForward(a.attn_out, a.atty, P + w.proj_w, P + w.proj_b, N, C, C));
  float* s1 = a.attn_out;
  if (peri) {
    NormForward(a.ln1o_out, a.ln1o_mean, a.ln1o_rstd, a.attn_out, P + w.ln1o_w, P + w.ln1o_b, N, C);
    s1 = a.ln1o_out;
  }
  if (dropout_active_) {
    LaunchDropoutMask(a.attn_mask, NC, p_drop, seed_, static_cast<uint64_t>(2 * l + 1), stream_);
    LaunchMultiply(s1, s1, a.attn_mask, NC, stream_);
  }
  residual(a.res1, x, s1);
  const float* x1 = a.res1;
  if (!norm_in) {
    NormForward(a.ln1_out, a.ln1_mean, a.ln1_rstd, a.res1, P + w.ln1_w, P + w.ln1_b, N, C);
    x1 = a.ln1_out;
  }
  // FFN sublayer.
  const float* ffn_in = x1;
  if (norm_in) {
    NormForward(a.ln2_out, a.ln2_mean, a.ln2_rstd, x1, P + w.ln2_w, P + w.ln2_b, N, C);
    ffn_in = a.ln2_out;
  }
  TRAINER_RETURN_IF_ERROR(MatmulForward(a.fc1_act, ffn_in, P + w.fc1_w, P + w.fc1_b, N, C, F));
  LaunchRelu(a.fc1_act, static_cast<size_t>(N) * F, stream_);
  TRAINER_RETURN_IF_ERROR(MatmulForward(a.ffn_out, a.fc1_act, P + w.fc2_w, P + w.fc2_b, N, F, C));
  float* s2 = a.ffn_out;
  if (peri) {
    NormForward(a.ln2o_out, a.ln2o_mean, a.ln2o_rstd, a.ffn_out, P + w.ln2o_w, P + w.ln2o_b, N, C);
    s2 = a.ln2o_out;
  }
  if (dropout_active_) {
    LaunchDropoutMask(a.ffn_mask, NC, p_drop, seed_, static_cast<uint64_t>(2 * l + 2), stream_);
    LaunchMultiply(s2, s2, a.ffn_mask, NC, stream_);
  }
  residual(a.res2, x1, s2);
  if (!norm_in) NormForward(a.ln2_out, a.ln2_mean, a.ln2_rstd, a.res2, P + w.ln2_w, P + w.ln2_b, N, C);
  return a.out();
}

Status CudaBackend::EnqueueForward(int B, int T, bool training) {
  const int C = model_.d_model, N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_;
  dropout_active_ = training && model_.dropout > 0.0f;

  const float* pos = layout_.has_pos_emb() ? P + layout_.pos_emb() : sin_pos_;
  LaunchEncoderForward(emb_out_, inputs_, P + layout_.tok_emb(), pos, N, T, C, std::sqrt(static_cast<float>(C)),
                       stream_);
  float* x0 = emb_out_;
  if (layout_.has_emb_ln()) {
    NormForward(emb_ln_out_, emb_ln_mean_, emb_ln_rstd_, emb_out_, P + layout_.lnemb_w(), P + layout_.lnemb_b(), N,
                C);
    x0 = emb_ln_out_;
  }
  if (dropout_active_) {
    LaunchDropoutMask(emb_mask_, NC, model_.dropout, seed_, 0, stream_);
    LaunchMultiply(x0, x0, emb_mask_, NC, stream_);
  }
  const float* x = x0;
  for (int l = 0; l < model_.layers; ++l) {
    TRAINER_ASSIGN_OR_RETURN(x, BlockForward(l, x, B, T, training));
  }
  const float* h = x;
  if (layout_.has_final_ln()) {
    NormForward(lnf_out_, lnf_mean_, lnf_rstd_, x, P + layout_.lnf_w(), P + layout_.lnf_b(), N, C);
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

Status CudaBackend::BlockBackward(int l, int B, int T, float*& dx, float*& dtmp) {
  const int C = model_.d_model, F = model_.d_ff, N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_;
  float* G = grads_;
  const float alpha = static_cast<float>(model_.ResidualAlpha());
  const BlockActivations& a = blocks_[static_cast<size_t>(l)];
  const BlockOffsets& w = layout_.blocks()[static_cast<size_t>(l)];
  const bool norm_in = !a.norm_after_residual();
  const bool peri = a.kind == Placement::kPeriLN;
  const float* attn_in = norm_in ? a.ln1_out : a.x_in;
  const float* ffn_in = norm_in ? a.ln2_out : a.ln1_out;
  // A sublayer's backward pass, every placement, as the CPU backend's: from
  // the gradient of what it adds to the residual stream (dout) to its
  // input's, written into dinput, or with accumulate set to alpha * dinput
  // + it (dinput then holds the residual sum's gradient; dout is read
  // before dinput changes). `core` takes the gradient of the sublayer's
  // output before any output norm and calls before_last ahead of its last
  // product.
  auto sublayer_backward = [&](const float* dout, float* dinput, bool accumulate, const float* mask,
                               size_t out_norm_w, size_t out_norm_b, const float* out_norm_in, const float* mean,
                               const float* rstd, auto core) -> Status {
    if (dropout_active_) {
      LaunchMultiply(grad_masked_, dout, mask, NC, stream_);
      dout = grad_masked_;
    }
    if (peri) {
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grad_norm_in_, 0, sizeof(float) * NC, stream_));
      NormBackward(grad_norm_in_, G + out_norm_w, G + out_norm_b, dout, out_norm_in, P + out_norm_w, mean, rstd, N,
                   C);
      dout = grad_norm_in_;
    }
    return core(dout, [&] {
      if (accumulate && alpha != 1.0f) LaunchScale(dinput, alpha, NC, stream_);
    });
  };
  auto ffn_backward = [&](const float* dout, float* dinput, bool accumulate) -> Status {
    return sublayer_backward(
        dout, dinput, accumulate, a.ffn_mask, w.ln2o_w, w.ln2o_b, a.ffn_out, a.ln2o_mean, a.ln2o_rstd,
        [&](const float* d, auto before_last) -> Status {
          TRAINER_RETURN_IF_ERROR(
              MatmulBackward(grad_fc1_act_, G + w.fc2_w, G + w.fc2_b, d, a.fc1_act, P + w.fc2_w, N, F, C, false));
          LaunchReluBackward(grad_fc1_act_, a.fc1_act, static_cast<size_t>(N) * F, stream_);
          before_last();
          return MatmulBackward(dinput, G + w.fc1_w, G + w.fc1_b, grad_fc1_act_, ffn_in, P + w.fc1_w, N, C, F,
                                accumulate);
        });
  };
  auto attention_backward = [&](const float* dout, float* dinput, bool accumulate) -> Status {
    return sublayer_backward(
        dout, dinput, accumulate, a.attn_mask, w.ln1o_w, w.ln1o_b, a.attn_out, a.ln1o_mean, a.ln1o_rstd,
        [&](const float* d, auto before_last) -> Status {
          TRAINER_RETURN_IF_ERROR(
              MatmulBackward(grad_atty_, G + w.proj_w, G + w.proj_b, d, a.atty, P + w.proj_w, N, C, C, false));
          TRAINER_RETURN_IF_ERROR(AttentionBackward(grad_qkv_, grad_atty_, a, B, T));
          if (model_.qk_norm) TRAINER_RETURN_IF_ERROR(QkNormBackward(a, w, N));
          before_last();
          return MatmulBackward(dinput, G + w.qkv_w, G + w.qkv_b, grad_qkv_, attn_in, P + w.qkv_w, N, C, 3 * C,
                                accumulate);
        });
  };
  if (norm_in) {
    // res2 = res1 + s2(ln2(res1)); dx = d res2.
    TRAINER_RETURN_IF_ERROR(ffn_backward(dx, dtmp, false));
    NormBackward(dx, G + w.ln2_w, G + w.ln2_b, dtmp, a.res1, P + w.ln2_w, a.ln2_mean, a.ln2_rstd, N, C);
    // dx = d res1; res1 = x + s1(ln1(x)).
    TRAINER_RETURN_IF_ERROR(attention_backward(dx, dtmp, false));
    NormBackward(dx, G + w.ln1_w, G + w.ln1_b, dtmp, a.x_in, P + w.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
  } else {
    // out = ln2(res2), res2 = alpha ln1_out + ffn(ln1_out), ln1_out = ln1(res1), res1 = alpha x + attn(x).
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dtmp, 0, sizeof(float) * NC, stream_));
    NormBackward(dtmp, G + w.ln2_w, G + w.ln2_b, dx, a.res2, P + w.ln2_w, a.ln2_mean, a.ln2_rstd, N, C);
    std::swap(dx, dtmp);  // dx = d res2
    TRAINER_RETURN_IF_ERROR(ffn_backward(dx, dx, true));  // d ln1_out = alpha d res2 + fc1 backward
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dtmp, 0, sizeof(float) * NC, stream_));
    NormBackward(dtmp, G + w.ln1_w, G + w.ln1_b, dx, a.res1, P + w.ln1_w, a.ln1_mean, a.ln1_rstd, N, C);
    std::swap(dx, dtmp);  // dx = d res1
    TRAINER_RETURN_IF_ERROR(attention_backward(dx, dx, true));
  }
  return OkStatus();
}

Status CudaBackend::EnqueueBackward(int B, int T) {
  const int C = model_.d_model, N = B * T;
  const size_t NC = static_cast<size_t>(N) * C;
  const float* P = params_;
  float* G = grads_;

  // Head: dlogits overwrites probs.
  float* dlogits = probs_;
  if (options_.z_loss > 0) {
    LaunchCrossEntropyZLossBackward(dlogits, probs_, row_log_z_, targets_, N, kVocabSize, loss_scale_,
                                    static_cast<float>(options_.z_loss), stream_);
  } else {
    LaunchCrossEntropyBackward(dlogits, probs_, targets_, N, kVocabSize, loss_scale_, stream_);
  }
  const float* x0 = layout_.has_emb_ln() ? emb_ln_out_ : emb_out_;
  const float* last = model_.layers > 0 ? blocks_.back().out() : x0;
  const float* h = layout_.has_final_ln() ? lnf_out_ : last;
  float* dx = grad_res_a_;
  float* dtmp = grad_res_b_;
  TRAINER_RETURN_IF_ERROR(MatmulBackward(dx, G + layout_.head_w(), G + layout_.head_b(), dlogits, h,
                                         P + layout_.head_w(), N, C, kVocabSize, false));
  if (layout_.has_final_ln()) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dtmp, 0, sizeof(float) * NC, stream_));
    NormBackward(dtmp, G + layout_.lnf_w(), G + layout_.lnf_b(), dx, last, P + layout_.lnf_w(), lnf_mean_, lnf_rstd_,
                 N, C);
    std::swap(dx, dtmp);
  }

  // dx holds d(loss)/d(block output) on entry to each iteration.
  for (int l = model_.layers - 1; l >= 0; --l) TRAINER_RETURN_IF_ERROR(BlockBackward(l, B, T, dx, dtmp));
  if (dropout_active_) LaunchMultiply(dx, dx, emb_mask_, NC, stream_);
  if (layout_.has_emb_ln()) {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dtmp, 0, sizeof(float) * NC, stream_));
    NormBackward(dtmp, G + layout_.lnemb_w(), G + layout_.lnemb_b(), dx, emb_out_, P + layout_.lnemb_w(),
                 emb_ln_mean_, emb_ln_rstd_, N, C);
    std::swap(dx, dtmp);
  }
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
