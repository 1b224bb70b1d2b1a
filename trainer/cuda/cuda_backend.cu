// CudaBackend as a Backend (trainer/cuda/cuda_backend_impl.cuh): a batch is
// staged in pinned memory, copied in and run on stream_; the training step of
// a (B, T) is captured once as a CUDA graph and replayed; the optimizer and
// the gradient and update norms run as kernels over the parameter layout.
// Also CreateCudaBackend and ListCudaDevices, which module_entry.cc exports.
#include "trainer/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/cuda/cuda_backend_impl.cuh"
#include "trainer/cuda/kernels.cuh"
#include "trainer/optimizer.h"

namespace normsweep::trainer::cuda {
namespace {

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

bool GraphsEnabled() {
  const char* env = std::getenv("NORMSWEEP_CUDA_GRAPHS");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

}  // namespace

CudaBackend::CudaBackend(const BackendOptions& options, int device)
    : options_(options),
      model_(options.model),
      layout_(ParamLayout::ForModel(options.model)),
      device_(device),
      use_graphs_(GraphsEnabled()) {}

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
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_row_loss_, acts_.row_loss, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_row_correct_, row_correct_, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  // log Z in training too: the z term (LossStats::z_term) needs its squares.
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_row_log_z_, acts_.row_log_z, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  if (!training) {
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

LossStats CudaBackend::CollectStats(const Batch& batch) const {
  LossStats stats;
  const size_t n = batch.targets.size();
  for (size_t i = 0; i < n; ++i) {
    if (batch.targets[i] < 0) continue;
    stats.loss_sum += host_row_loss_[i];
    const double log_z = host_row_log_z_[i];
    stats.log_z_sum += log_z;
    stats.log_z_sq_sum += log_z * log_z;
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
  return CollectStats(batch);
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
  return CollectStats(batch);
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

StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options) {
  TRAINER_RETURN_IF_ERROR(ValidateModelConfig(options.model));
  if (!(options.z_loss >= 0.0 && std::isfinite(options.z_loss))) {
    return InvalidArgument("z_loss: must be a finite number >= 0");
  }
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
