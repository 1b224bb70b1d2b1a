#include "trainer/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "trainer/activations.h"
#include "trainer/cpu/ops.h"
#include "trainer/cuda/kernels.cuh"
#include "trainer/optimizer.h"

namespace normsweep::trainer::cuda {
namespace {

constexpr float kLayerNormEps = 1e-5f;
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
constexpr size_t kNormSegment = size_t{1} << 16;  // elements per block of the gradient norms

Status CudaStatus(const char* call, cudaError_t e) {
  return Internal(std::string("cuda: ") + call + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
Status CublasStatus(const char* call, cublasStatus_t e) {
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

StatusOr<int> ParseDeviceIndex(const std::string& device) {
  if (device == "cuda") return 0;
  const std::string prefix = "cuda:";
  if (device.rfind(prefix, 0) != 0 || device.size() == prefix.size() || device.size() > prefix.size() + 4) {
    return InvalidArgument("device: '" + device + "' is not cpu, cuda or cuda:N");
  }
  int index = 0;
  for (size_t i = prefix.size(); i < device.size(); ++i) {
    if (device[i] < '0' || device[i] > '9') return InvalidArgument("device: '" + device + "' is not cuda:N");
    index = index * 10 + (device[i] - '0');
  }
  return index;
}

cublasComputeType_t ComputeType(Precision p) {
  switch (p) {
    case Precision::kTf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Precision::kBf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case Precision::kFp32: break;
  }
  return CUBLAS_COMPUTE_32F;
}

bool GraphsEnabled() {
  const char* env = std::getenv("NORMSWEEP_CUDA_GRAPHS");
  return env == nullptr || std::strcmp(env, "0") != 0;
}


class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options, int device)
      : options_(options),
        model_(options.model),
        layout_(ParamLayout::ForModel(options.model)),
        device_(device),
        use_graphs_(GraphsEnabled()) {}

  ~CudaBackend() override {
    cudaSetDevice(device_);
    if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    ReleaseCapacity();
    for (void* p : device_allocations_) cudaFree(p);
    for (void* p : host_allocations_) cudaFreeHost(p);
  }

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
  void ReleaseCapacity() {
    for (void* p : capacity_device_allocations_) cudaFree(p);
    for (void* p : capacity_host_allocations_) cudaFreeHost(p);
    capacity_device_allocations_.clear();
    capacity_host_allocations_.clear();
    capacity_b_ = 0;
  }
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
  Status Stage(const Batch& batch, uint64_t dropout_seed, int64_t count);
  // Enqueue one pass on stream_, reading the staged batch from device memory.
  Status EnqueueStep(int B, int T, bool training);
  Status EnqueueForward(int B, int T, bool training);
  Status EnqueueBackward(int B, int T);
  Status RunTrainingStep(int B, int T);
  Status CaptureTrainingStep(int B, int T);
  // with_log_z: the row log Z were copied out too (evaluation only).
  LossStats CollectStats(const Batch& batch, bool with_log_z) const;
  // OptimizerStep with args.measure_update: the step, bracketed by a copy
  // of the weights before it and the update's squared norms after it.
  Status MeasuredOptimizerStep(const OptimizerStepArgs& args);

  // Row-major C (M,N) = op(A) @ op(B) + beta * C, batch of them with strides.
  // exact_fp32 overrides the precision option (tf32/bf16) for this product.
  Status Gemm(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
              int ldc, float beta, int batch = 1, long long sa = 0, long long sb = 0, long long sc = 0,
              bool exact_fp32 = false);
  Status MatmulForward(float* out, const float* inp, const float* w, const float* b, int N, int I, int O);
  Status MatmulBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                        int N, int I, int O, bool accumulate);
  // row_max (B*H*T), when not null: each query row's largest attention logit.
  Status AttentionForward(BlockActivations& a, int B, int T, float* row_max);
  Status AttentionBackward(float* dqkv, const float* datty, const BlockActivations& a, int B, int T);
  void LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                         const float* mean, const float* rstd, int N);

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
  float *row_loss_ = nullptr, *host_row_loss_ = nullptr;                                             // (N)
  float *row_log_z_ = nullptr, *host_row_log_z_ = nullptr;                                           // (N)
  float* attn_row_max_ = nullptr;  // (layers, B*H*T): each query row's largest logit, in evaluation
  int32_t *row_correct_ = nullptr, *host_row_correct_ = nullptr;  // (N)
  uint64_t *seed_ = nullptr, *host_seed_ = nullptr;
  float *loss_scale_ = nullptr, *host_loss_scale_ = nullptr;

  // Activations and scratch (sized for capacity_b_).
  float *emb_out_ = nullptr, *emb_mask_ = nullptr;
  std::vector<BlockActivations> blocks_;
  float *lnf_out_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
  float *logits_ = nullptr, *probs_ = nullptr;
  // Backward scratch, gradients of activations (grad_): the residual
  // stream's (N,C), in two buffers that swap as the pass goes down; a
  // sublayer output's times its dropout mask (N,C); attention's merged
  // output atty (N,C); qkv (N,3C); the ReLU output fc1_act (N,F).
  float *grad_res_a_ = nullptr, *grad_res_b_ = nullptr, *grad_masked_ = nullptr, *grad_atty_ = nullptr;
  float *grad_qkv_ = nullptr, *grad_fc1_act_ = nullptr;
  // Attention heads, each (B,H,T,hd), y_ also dy in backward; grad_att_ (B,H,T,T).
  float *q_ = nullptr, *k_ = nullptr, *v_heads_ = nullptr, *y_ = nullptr, *grad_att_ = nullptr;
  float *grad_q_ = nullptr, *grad_k_ = nullptr, *grad_v_ = nullptr, *partial_ = nullptr;
  bool dropout_active_ = false;

  // The captured training step, for one (B, T).
  cudaGraphExec_t graph_exec_ = nullptr;
  int graph_b_ = 0, graph_t_ = 0;
  int eager_b_ = 0, eager_t_ = 0;  // the shape of the last eager training step
};

Status CudaBackend::Init() {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
  // A fixed workspace: cuBLAS then allocates nothing while a graph is captured.
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(reinterpret_cast<char**>(&cublas_workspace_), kCublasWorkspaceBytes));
  CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
  // fp32 means fp32: the default math mode uses TF32 only when the compute
  // type (ComputeType above) asks for it.
  CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));

  const size_t P = layout_.total();
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&params_, P));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&grads_, P));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&m_, P));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&v_, P));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(params_, 0, P * sizeof(float), stream_));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grads_, 0, P * sizeof(float), stream_));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m_, 0, P * sizeof(float), stream_));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(v_, 0, P * sizeof(float), stream_));

  std::vector<float> sin_pos(static_cast<size_t>(model_.seq_len) * model_.d_model);
  cpu::SinusoidalPositions(sin_pos.data(), model_.seq_len, model_.d_model);
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&sin_pos_, sin_pos.size()));
  CUDA_RETURN_IF_ERROR(CopySync(sin_pos_, sin_pos.data(), sin_pos.size() * sizeof(float), cudaMemcpyHostToDevice));

  std::vector<size_t> begin, len;
  for (size_t t = 0; t < layout_.tensors().size(); ++t) {
    const TensorSpec& spec = layout_.tensors()[t];
    for (size_t o = 0; o < spec.size; o += kNormSegment) {
      begin.push_back(spec.offset + o);
      len.push_back(std::min(kNormSegment, spec.size - o));
      segment_tensor_.push_back(t);
    }
  }
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&segment_begin_, begin.size()));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&segment_len_, len.size()));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&segment_norms_, begin.size()));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_segment_norms_, begin.size()));
  CUDA_RETURN_IF_ERROR(CopySync(segment_begin_, begin.data(), begin.size() * sizeof(size_t), cudaMemcpyHostToDevice));
  CUDA_RETURN_IF_ERROR(CopySync(segment_len_, len.data(), len.size() * sizeof(size_t), cudaMemcpyHostToDevice));

  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_seed_, 1));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&seed_, 1));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_loss_scale_, 1));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&loss_scale_, 1));
  max_attn_logit_.assign(static_cast<size_t>(model_.layers), -INFINITY);
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&block_max_, static_cast<size_t>(model_.layers)));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_block_max_, static_cast<size_t>(model_.layers)));
  TRAINER_RETURN_IF_ERROR(EnsureCapacity(std::max(1, options_.max_batch_size)));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return OkStatus();
}

Status CudaBackend::Upload(float* dst, const std::vector<float>& host, const char* what) {
  if (host.size() != layout_.total()) return InvalidArgument(std::string(what) + ": wrong size");
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  CUDA_RETURN_IF_ERROR(CopySync(dst, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  return OkStatus();
}

Status CudaBackend::Download(const float* src, std::vector<float>* host) {
  host->resize(layout_.total());
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  CUDA_RETURN_IF_ERROR(CopySync(host->data(), src, host->size() * sizeof(float), cudaMemcpyDeviceToHost));
  return OkStatus();
}

Status CudaBackend::EnsureCapacity(int B) {
  if (B <= capacity_b_) return OkStatus();
  // Growing is rare (the trainer sizes for its batch up front): drop the
  // graph and the old buffers (their contents are not needed), then
  // allocate afresh. On failure capacity_b_ stays 0, so nothing uses the
  // stale pointers.
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (graph_exec_ != nullptr) {
    cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
  }
  ReleaseCapacity();
  const size_t N = static_cast<size_t>(B) * model_.seq_len;
  const size_t C = model_.d_model, F = model_.d_ff, H = model_.heads, T = model_.seq_len;
  const size_t V = kVocabSize;
  const bool dropout = model_.dropout > 0.0f;
  BufferPlan plan;
  plan.push_back({&emb_out_, N * C});
  if (dropout) plan.push_back({&emb_mask_, N * C});
  PlanBlockActivations(model_, B, &blocks_, &plan);
  plan.push_back({&lnf_out_, N * C});
  plan.push_back({&lnf_mean_, N});
  plan.push_back({&lnf_rstd_, N});
  plan.push_back({&logits_, N * V});
  plan.push_back({&probs_, N * V});
  for (float** p : {&grad_res_a_, &grad_res_b_, &grad_masked_, &grad_atty_, &y_}) plan.push_back({p, N * C});
  plan.push_back({&grad_qkv_, N * 3 * C});
  plan.push_back({&grad_fc1_act_, N * F});
  for (float** p : {&q_, &k_, &v_heads_, &grad_q_, &grad_k_, &grad_v_}) plan.push_back({p, N * C});
  plan.push_back({&grad_att_, static_cast<size_t>(B) * H * T * T});
  plan.push_back({&partial_, cuda::ColumnReducePartialFloats(static_cast<int>(N),
                                                             static_cast<int>(std::max({3 * C, F, V})))});
  float* arena = nullptr;
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&arena, ArenaFloats(plan, 64), true));  // 256-byte aligned buffers
  AssignArena(plan, arena, 64);
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_inputs_, N, true));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_targets_, N, true));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_row_loss_, N, true));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_row_correct_, N, true));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_row_log_z_, N, true));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&row_log_z_, N, true));
  if (options_.diagnostics) {
    TRAINER_RETURN_IF_ERROR(DeviceAlloc(&attn_row_max_, static_cast<size_t>(model_.layers) * H * N, true));
  }
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&inputs_, N, true));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&targets_, N, true));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&row_loss_, N, true));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&row_correct_, N, true));
  capacity_b_ = B;
  return OkStatus();
}

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

Status CudaBackend::Stage(const Batch& batch, uint64_t dropout_seed, int64_t count) {
  const size_t n = batch.inputs.size();
  std::memcpy(host_inputs_, batch.inputs.data(), n * sizeof(int32_t));
  std::memcpy(host_targets_, batch.targets.data(), n * sizeof(int32_t));
  *host_seed_ = dropout_seed;
  *host_loss_scale_ = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  return OkStatus();
}

// Copies the staged batch in, runs the pass, copies the per-row loss out.
Status CudaBackend::EnqueueStep(int B, int T, bool training) {
  const size_t n = static_cast<size_t>(B) * T;
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(inputs_, host_inputs_, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(targets_, host_targets_, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(seed_, host_seed_, sizeof(uint64_t), cudaMemcpyHostToDevice, stream_));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(loss_scale_, host_loss_scale_, sizeof(float), cudaMemcpyHostToDevice, stream_));
  TRAINER_RETURN_IF_ERROR(EnqueueForward(B, T, training));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_row_loss_, row_loss_, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_row_correct_, row_correct_, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  if (!training) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host_row_log_z_, row_log_z_, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    if (options_.diagnostics && model_.layers > 0) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_block_max_, block_max_, model_.layers * sizeof(float),
                                           cudaMemcpyDeviceToHost, stream_));
    }
  }
  if (training) TRAINER_RETURN_IF_ERROR(EnqueueBackward(B, T));
  return OkStatus();
}

// The first step of a (B, T) runs eagerly (first launches load kernels and
// let cuBLAS pick its algorithms outside any capture); the second is
// captured as a graph and every later one replays it. If capture fails the
// backend says so on stderr and stays eager: same results, more launches.
Status CudaBackend::RunTrainingStep(int B, int T) {
  if (use_graphs_ && graph_exec_ != nullptr && graph_b_ == B && graph_t_ == T) {
    CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_exec_, stream_));
  } else if (use_graphs_ && eager_b_ == B && eager_t_ == T) {
    TRAINER_RETURN_IF_ERROR(CaptureTrainingStep(B, T));
    if (graph_exec_ != nullptr) {
      CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_exec_, stream_));
    } else {
      TRAINER_RETURN_IF_ERROR(EnqueueStep(B, T, /*training=*/true));
    }
  } else {
    TRAINER_RETURN_IF_ERROR(EnqueueStep(B, T, /*training=*/true));
    eager_b_ = B;
    eager_t_ = T;
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return OkStatus();
}

Status CudaBackend::CaptureTrainingStep(int B, int T) {
  if (graph_exec_ != nullptr) {
    cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
  }
  CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  const Status enqueued = EnqueueStep(B, T, /*training=*/true);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  cudaError_t instantiated = cudaSuccess;
  if (enqueued.ok() && ended == cudaSuccess) {
    instantiated = cudaGraphInstantiate(&graph_exec_, graph, 0);
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (enqueued.ok() && ended == cudaSuccess && instantiated == cudaSuccess) {
    graph_b_ = B;
    graph_t_ = T;
    return OkStatus();
  }
  graph_exec_ = nullptr;
  cudaGetLastError();  // a failed capture leaves its error behind
  std::string why = !enqueued.ok()      ? enqueued.message()
                    : ended != cudaSuccess ? std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended)
                                           : std::string("cudaGraphInstantiate: ") + cudaGetErrorString(instantiated);
  std::fprintf(stderr, "normsweep-train: %s: CUDA graph capture failed (%s); running eagerly\n", name().c_str(),
               why.c_str());
  use_graphs_ = false;
  return OkStatus();
}

LossStats CudaBackend::CollectStats(const Batch& batch, bool with_log_z) const {
  LossStats stats;
  const size_t n = batch.targets.size();
  for (size_t i = 0; i < n; ++i) {
    if (batch.targets[i] < 0) continue;
    stats.loss_sum += host_row_loss_[i];
    if (with_log_z) stats.log_z_sum += host_row_log_z_[i];
    stats.count += 1;
    stats.correct += host_row_correct_[i];
  }
  return stats;
}

StatusOr<LossStats> CudaBackend::ForwardBackward(const Batch& batch, uint64_t dropout_seed) {
  TRAINER_RETURN_IF_ERROR(CheckBatch(batch, model_));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  TRAINER_RETURN_IF_ERROR(EnsureCapacity(batch.batch_size));
  int64_t count = 0;
  for (int32_t t : batch.targets) count += t >= 0;
  TRAINER_RETURN_IF_ERROR(Stage(batch, dropout_seed, count));
  TRAINER_RETURN_IF_ERROR(RunTrainingStep(batch.batch_size, batch.seq_len));
  return CollectStats(batch, /*with_log_z=*/false);
}

StatusOr<LossStats> CudaBackend::Evaluate(const Batch& batch) {
  TRAINER_RETURN_IF_ERROR(CheckBatch(batch, model_));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  TRAINER_RETURN_IF_ERROR(EnsureCapacity(batch.batch_size));
  TRAINER_RETURN_IF_ERROR(Stage(batch, 0, 0));
  TRAINER_RETURN_IF_ERROR(EnqueueStep(batch.batch_size, batch.seq_len, /*training=*/false));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (options_.diagnostics) {
    for (int l = 0; l < model_.layers; ++l) {
      max_attn_logit_[l] = std::max(max_attn_logit_[l], static_cast<double>(host_block_max_[l]));
    }
  }
  return CollectStats(batch, /*with_log_z=*/true);
}

StatusOr<std::vector<double>> CudaBackend::TakeMaxAttentionLogits() {
  std::vector<double> out = max_attn_logit_;
  std::fill(max_attn_logit_.begin(), max_attn_logit_.end(), -INFINITY);
  return out;
}

StatusOr<UpdateSquaredNorms> CudaBackend::LastUpdateSquaredNorms() {
  if (!update_measured_) return Internal("no optimizer step measured its update");
  return update_sq_;
}

Status CudaBackend::MeasuredOptimizerStep(const OptimizerStepArgs& args) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  const size_t P = layout_.total();
  const int segments = static_cast<int>(segment_tensor_.size());
  if (weights_before_ == nullptr) {
    TRAINER_RETURN_IF_ERROR(DeviceAlloc(&weights_before_, P));
    TRAINER_RETURN_IF_ERROR(DeviceAlloc(&update_norms_, 2 * static_cast<size_t>(segments)));
    TRAINER_RETURN_IF_ERROR(HostAlloc(&host_update_norms_, 2 * static_cast<size_t>(segments)));
  }
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(weights_before_, params_, P * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  OptimizerStepArgs plain = args;
  plain.measure_update = false;
  TRAINER_RETURN_IF_ERROR(OptimizerStep(plain));
  LaunchSegmentUpdateSquaredNorms(update_norms_, update_norms_ + segments, params_, weights_before_,
                                  segment_begin_, segment_len_, segments, stream_);
  CUDA_RETURN_IF_LAUNCH_FAILED("update norm kernel");
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_update_norms_, update_norms_, 2 * segments * sizeof(double),
                                       cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  update_sq_.update.assign(layout_.tensors().size(), 0.0);
  update_sq_.weight.assign(layout_.tensors().size(), 0.0);
  for (int i = 0; i < segments; ++i) {
    const size_t t = segment_tensor_[static_cast<size_t>(i)];
    update_sq_.update[t] += host_update_norms_[i];
    update_sq_.weight[t] += host_update_norms_[segments + i];
  }
  update_measured_ = true;
  return OkStatus();
}

StatusOr<std::vector<double>> CudaBackend::GradientSquaredNorms() {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  const int segments = static_cast<int>(segment_tensor_.size());
  LaunchSegmentSquaredNorms(segment_norms_, grads_, segment_begin_, segment_len_, segments, stream_);
  CUDA_RETURN_IF_LAUNCH_FAILED("gradient norm kernel");
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_segment_norms_, segment_norms_, segments * sizeof(double),
                                       cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  std::vector<double> norms(layout_.tensors().size(), 0.0);
  for (int i = 0; i < segments; ++i) norms[segment_tensor_[static_cast<size_t>(i)]] += host_segment_norms_[i];
  return norms;
}

Status CudaBackend::OptimizerStep(const OptimizerStepArgs& args) {
  if (args.measure_update) return MeasuredOptimizerStep(args);
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // One launch per run of consecutive tensors with the same weight decay:
  // a single launch over all parameters when weight_decay is 0.
  const std::vector<TensorSpec>& tensors = layout_.tensors();
  auto decay_of = [&](const TensorSpec& t) { return t.decay ? options_.optimizer.weight_decay : 0.0; };
  for (size_t i = 0; i < tensors.size();) {
    size_t j = i + 1;
    while (j < tensors.size() && decay_of(tensors[j]) == decay_of(tensors[i])) ++j;
    const size_t begin = tensors[i].offset, n = tensors[j - 1].offset + tensors[j - 1].size - begin;
    const double wd = decay_of(tensors[i]);
    if (options_.optimizer.kind == OptimizerKind::kSgd) {
      LaunchSgd(params_ + begin, grads_ + begin, m_ + begin, n, SgdFor(options_.optimizer, args, wd), stream_);
    } else if (options_.optimizer.kind == OptimizerKind::kRAdam) {
      LaunchRAdam(params_ + begin, grads_ + begin, m_ + begin, v_ + begin, n, RAdamFor(options_.optimizer, args, wd),
                  stream_);
    } else {
      LaunchAdam(params_ + begin, grads_ + begin, m_ + begin, v_ + begin, n, AdamFor(options_.optimizer, args, wd),
                 stream_);
    }
    i = j;
  }
  CUDA_RETURN_IF_LAUNCH_FAILED("optimizer kernel");
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options) {
  TRAINER_RETURN_IF_ERROR(ValidateModelConfig(options.model));
  TRAINER_ASSIGN_OR_RETURN(const int index, ParseDeviceIndex(options.device));
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return InvalidArgument("device: " + options.device + " requested but no CUDA device is usable (" +
                           (e != cudaSuccess ? std::string(cudaGetErrorString(e)) : std::string("none found")) + ")");
  }
  if (index >= count) {
    return InvalidArgument("device: " + options.device + " does not exist (" + std::to_string(count) +
                           " CUDA device(s): cuda:0..cuda:" + std::to_string(count - 1) + ")");
  }
  auto backend = std::make_unique<CudaBackend>(options, index);
  TRAINER_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<Backend>(std::move(backend));
}

std::vector<std::string> ListCudaDevices() {
  std::vector<std::string> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear "no driver" so later calls start clean
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    const double gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
    char line[256];
    std::snprintf(line, sizeof(line), "cuda:%d (%s, %.0f GiB, sm_%d%d)", i, prop.name, gib, prop.major, prop.minor);
    out.emplace_back(line);
  }
  return out;
}

}  // namespace normsweep::trainer::cuda
