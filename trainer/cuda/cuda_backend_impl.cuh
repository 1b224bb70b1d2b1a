// The class behind CreateCudaBackend (trainer/cuda/cuda_backend.h), private
// to trainer/cuda/ since it includes the CUDA headers. Its code is split by job:
//   cuda_buffers.cu           device memory: what is allocated, with its shapes,
//                             the batch-sized arena, uploads and downloads;
//   cuda_forward_backward.cu  the passes: cuBLAS products, attention, and the
//                             forward and backward enqueues;
//   cuda_backend.cu           the Backend adapter: staging a batch, the CUDA
//                             graph of a training step, loss statistics,
//                             gradient and update norms, the optimizer.
// Names: device buffers are plain (params_, logits_, inputs_), their pinned
// host twins start with host_, gradients of activations with grad_ (grads_
// holds the weights'). Function arguments keep ops.h's dout/dinp shorthand.
#ifndef NORMSWEEP_TRAINER_CUDA_CUDA_BACKEND_IMPL_CUH_
#define NORMSWEEP_TRAINER_CUDA_CUDA_BACKEND_IMPL_CUH_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/backend.h"
#include "trainer/optimizer.h"
#include "trainer/program/activations.h"
#include "trainer/program/block_program.h"

namespace normsweep::trainer::cuda {

inline Status CudaStatus(const char* call, cudaError_t e) {
  return Internal(std::string("cuda: ") + call + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
inline Status CublasStatus(const char* call, cublasStatus_t e) {
  return Internal(std::string("cublas: ") + call + " failed: " + cublasGetStatusName(e) + ": " +
                  cublasGetStatusString(e));
}

#define CUDA_RETURN_IF_ERROR(call)                         \
  do {                                                     \
    const cudaError_t cuda_error_ = (call);                \
    if (cuda_error_ != cudaSuccess) return CudaStatus(#call, cuda_error_); \
  } while (0)
#define CUBLAS_RETURN_IF_ERROR(call)                             \
  do {                                                           \
    const cublasStatus_t cublas_error_ = (call);                 \
    if (cublas_error_ != CUBLAS_STATUS_SUCCESS) return CublasStatus(#call, cublas_error_); \
  } while (0)
// Kernel launches report configuration errors through cudaGetLastError.
#define CUDA_RETURN_IF_LAUNCH_FAILED(what)                  \
  do {                                                      \
    const cudaError_t cuda_error_ = cudaGetLastError();     \
    if (cuda_error_ != cudaSuccess) return CudaStatus(what, cuda_error_); \
  } while (0)

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options, int device);  // cuda_backend.cu
  ~CudaBackend() override;                                          // cuda_buffers.cu
  // Allocates the backend-lifetime buffers and the batch arena (cuda_buffers.cu).
  Status Init();

  std::string name() const override { return "cuda:" + std::to_string(device_); }
  std::string precision() const override { return PrecisionName(options_.precision); }
  const ParamLayout& layout() const override { return layout_; }

  Status SetParameters(const std::vector<float>& host) override { return Upload(params_, host, "parameters"); }
  Status GetParameters(std::vector<float>* host) override { return Download(params_, host); }
  Status GetGradients(std::vector<float>* host) override { return Download(grads_, host); }
  Status SetOptimizerState(const std::vector<float>& m, const std::vector<float>& v) override {
    if (m.size() != layout_.total() || v.size() != layout_.total()) {
      return InvalidArgument("optimizer state: wrong size");
    }
    TRAINER_RETURN_IF_ERROR(Upload(m_, m, "optimizer state"));
    return Upload(v_, v, "optimizer state");
  }
  Status GetOptimizerState(std::vector<float>* m, std::vector<float>* v) override {
    TRAINER_RETURN_IF_ERROR(Download(m_, m));
    return Download(v_, v);
  }

  StatusOr<LossStats> ForwardBackward(const Batch& batch, uint64_t dropout_seed) override;
  StatusOr<LossStats> Evaluate(const Batch& batch) override;
  StatusOr<std::vector<double>> TakeMaxAttentionLogits() override;
  StatusOr<std::vector<double>> GradientSquaredNorms() override;
  Status OptimizerStep(const OptimizerStepArgs& args) override;
  StatusOr<UpdateSquaredNorms> LastUpdateSquaredNorms() override;

 private:
  // cuda_buffers.cu: device memory.
  void ReleaseCapacity();
  // Allocations that live as long as the backend go to device_allocations_;
  // EnsureCapacity's go to capacity_device_allocations_ (`batch_sized`).
  template <class T>
  Status DeviceAlloc(T** ptr, size_t count, bool batch_sized = false) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, std::max<size_t>(1, count) * sizeof(T));
    if (e != cudaSuccess) {
      return Internal("cuda: out of device memory allocating " + std::to_string(count * sizeof(T)) + " bytes on " +
                      name() + " (" + cudaGetErrorString(e) + "); use a smaller model or batch_size");
    }
    (batch_sized ? capacity_device_allocations_ : device_allocations_).push_back(p);
    *ptr = static_cast<T*>(p);
    return OkStatus();
  }
  template <class T>
  Status HostAlloc(T** ptr, size_t count, bool batch_sized = false) {
    void* p = nullptr;
    CUDA_RETURN_IF_ERROR(cudaMallocHost(&p, std::max<size_t>(1, count) * sizeof(T)));
    (batch_sized ? capacity_host_allocations_ : host_allocations_).push_back(p);
    *ptr = static_cast<T*>(p);
    return OkStatus();
  }
  // Every transfer goes through stream_ (a non-blocking stream, so the
  // legacy default stream would not be ordered with the kernels) and waits
  // for it: the caller's host memory is pageable.
  cudaError_t CopySync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, stream_);
    return e != cudaSuccess ? e : cudaStreamSynchronize(stream_);
  }
  Status Upload(float* dst, const std::vector<float>& host, const char* what);
  Status Download(const float* src, std::vector<float>* host);
  Status EnsureCapacity(int B);

  // cuda_forward_backward.cu: the passes, the block program over this
  // backend's ops (DeviceOps), enqueued on stream_.
  class DeviceOps;
  PassArgs PassFor(int B, int T, bool training) const;
  Status EnqueueForward(int B, int T, bool training);
  Status EnqueueBackward(int B, int T);
  // Row-major C (M,N) = op(A) @ op(B) + beta * C, batch of them with strides.
  // exact_fp32 overrides the precision option (tf32/bf16) for this product.
  Status Gemm(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
              int ldc, float beta, int batch = 1, long long sa = 0, long long sb = 0, long long sc = 0,
              bool exact_fp32 = false);

  // cuda_backend.cu: a step as the Backend runs it.
  Status Stage(const Batch& batch, uint64_t dropout_seed, int64_t count);
  // Enqueue one pass on stream_, reading the staged batch from device memory.
  Status EnqueueStep(int B, int T, bool training);
  Status RunTrainingStep(int B, int T);
  Status CaptureTrainingStep(int B, int T);
  // From the rows copied out by EnqueueStep, the log Z sums included.
  LossStats CollectStats(const Batch& batch) const;
  // OptimizerStep with args.measure_update: the step, bracketed by a copy
  // of the weights before it and the update's squared norms after it.
  Status MeasuredOptimizerStep(const OptimizerStepArgs& args);

  BackendOptions options_;
  ModelConfig model_;
  ParamLayout layout_;
  int device_;
  bool use_graphs_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::vector<void*> device_allocations_, host_allocations_;
  // The batch-sized buffers (EnsureCapacity), freed when they grow.
  std::vector<void*> capacity_device_allocations_, capacity_host_allocations_;

  float *params_ = nullptr, *grads_ = nullptr, *m_ = nullptr, *v_ = nullptr;
  float* sin_pos_ = nullptr;
  void* cublas_workspace_ = nullptr;
  // Gradient-norm segments.
  std::vector<size_t> segment_tensor_;
  size_t *segment_begin_ = nullptr, *segment_len_ = nullptr;
  double *segment_norms_ = nullptr, *host_segment_norms_ = nullptr;
  // A measured optimizer step: the weights before it, the update's and the
  // old weights' squared norms per segment (2 x segments), per tensor.
  float* weights_before_ = nullptr;
  double *update_norms_ = nullptr, *host_update_norms_ = nullptr;
  UpdateSquaredNorms update_sq_;
  bool update_measured_ = false;
  // Attention-logit maxima of evaluations (options_.diagnostics): per block,
  // over the Evaluate calls since the last TakeMaxAttentionLogits.
  std::vector<double> max_attn_logit_;
  float *block_max_ = nullptr, *host_block_max_ = nullptr;  // (layers), one evaluation's

  // Staged batch: device buffers and their pinned host twins (host_), N = B*T.
  int capacity_b_ = 0;
  int32_t *inputs_ = nullptr, *targets_ = nullptr, *host_inputs_ = nullptr, *host_targets_ = nullptr;  // (N)
  float* host_row_loss_ = nullptr;    // (N), from acts_.row_loss
  float* host_row_log_z_ = nullptr;   // (N), from acts_.row_log_z
  float* attn_row_max_ = nullptr;  // (layers, B*H*T): each query row's largest logit, in evaluation
  int32_t *row_correct_ = nullptr, *host_row_correct_ = nullptr;  // (N)
  uint64_t *seed_ = nullptr, *host_seed_ = nullptr;
  float *loss_scale_ = nullptr, *host_loss_scale_ = nullptr;

  // The block program's activations and scratch (sized for capacity_b_).
  Activations acts_;
  // The ops' own scratch: attention heads, each (B,H,T,hd), y_ also dy in
  // backward; grad_att_ (B,H,T,T); the column reductions' partial sums.
  float *q_ = nullptr, *k_ = nullptr, *v_heads_ = nullptr, *y_ = nullptr, *grad_att_ = nullptr;
  float *grad_q_ = nullptr, *grad_k_ = nullptr, *grad_v_ = nullptr, *partial_ = nullptr;

  // The captured training step, for one (B, T).
  cudaGraphExec_t graph_exec_ = nullptr;
  int graph_b_ = 0, graph_t_ = 0;
  int eager_b_ = 0, eager_t_ = 0;  // the shape of the last eager training step
};

}  // namespace normsweep::trainer::cuda

#endif  // NORMSWEEP_TRAINER_CUDA_CUDA_BACKEND_IMPL_CUH_
