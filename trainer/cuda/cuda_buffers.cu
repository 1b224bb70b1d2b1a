// CudaBackend's device memory (trainer/cuda/cuda_backend_impl.cuh): the
// backend-lifetime buffers (parameters, gradients, optimizer moments, the
// position table, gradient-norm segments) that Init allocates, and the
// batch-sized arena of activations and scratch that EnsureCapacity lays out
// for B sequences of T = seq_len, N = B*T rows.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/cpu/ops.h"
#include "trainer/cuda/cuda_backend_impl.cuh"
#include "trainer/cuda/kernels.cuh"

namespace normsweep::trainer::cuda {
namespace {

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
constexpr size_t kNormSegment = size_t{1} << 16;  // elements per block of the gradient norms

}  // namespace

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  ReleaseCapacity();
  for (void* p : device_allocations_) cudaFree(p);
  for (void* p : host_allocations_) cudaFreeHost(p);
}

void CudaBackend::ReleaseCapacity() {
  for (void* p : capacity_device_allocations_) cudaFree(p);
  for (void* p : capacity_host_allocations_) cudaFreeHost(p);
  capacity_device_allocations_.clear();
  capacity_host_allocations_.clear();
  capacity_b_ = 0;
}

Status CudaBackend::Init() {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
  // A fixed workspace: cuBLAS then allocates nothing while a graph is captured.
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(reinterpret_cast<char**>(&cublas_workspace_), kCublasWorkspaceBytes));
  CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
  // fp32 means fp32: the default math mode uses TF32 only when the compute
  // type (ComputeType, cuda_forward_backward.cu) asks for it.
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
  BufferPlan plan;
  PlanActivations(model_, layout_, B, &acts_, &plan);
  for (float** p : {&y_, &q_, &k_, &v_heads_, &grad_q_, &grad_k_, &grad_v_}) plan.push_back({p, N * C, "attention"});
  plan.push_back({&grad_att_, static_cast<size_t>(B) * H * T * T, "grad_att"});
  // Column reductions are over at most max(3C, F, V) columns of N rows;
  // qk_norm's over hd columns of N*H rows need no more (Chunks(N*H) <= H * Chunks(N)).
  plan.push_back({&partial_,
                  cuda::ColumnReducePartialFloats(static_cast<int>(N), static_cast<int>(std::max({3 * C, F, V}))),
                  "partial"});
  float* arena = nullptr;
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&arena, ArenaFloats(plan, 64), true));  // 256-byte aligned buffers
  AssignArena(plan, arena, 64);
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_inputs_, N, true));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_targets_, N, true));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_row_loss_, N, true));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_row_correct_, N, true));
  TRAINER_RETURN_IF_ERROR(HostAlloc(&host_row_log_z_, N, true));
  if (options_.diagnostics) {
    TRAINER_RETURN_IF_ERROR(DeviceAlloc(&attn_row_max_, static_cast<size_t>(model_.layers) * H * N, true));
  }
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&inputs_, N, true));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&targets_, N, true));
  TRAINER_RETURN_IF_ERROR(DeviceAlloc(&row_correct_, N, true));
  capacity_b_ = B;
  return OkStatus();
}

}  // namespace normsweep::trainer::cuda
