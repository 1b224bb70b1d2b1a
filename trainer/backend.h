// The compute backend interface: one model's parameters, gradients,
// optimizer state and the kernels that move them. The CPU backend
// (trainer/cpu/) and the CUDA backend (trainer/cuda/) implement it; this
// header includes no CUDA header. All host buffers use ParamLayout's flat
// order. A Backend is used from one thread at a time.
#ifndef NORMSWEEP_TRAINER_BACKEND_H_
#define NORMSWEEP_TRAINER_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/settings/config.h"
#include "trainer/param_layout.h"
#include "trainer/settings/status.h"

namespace normsweep::trainer {

// One batch of token windows on the host. inputs and targets are [B, T];
// a target of -1 is ignored by the loss (e.g. the source half of a task).
struct Batch {
  std::vector<int32_t> inputs;
  std::vector<int32_t> targets;
  int batch_size = 0;
  int seq_len = 0;
};

struct LossStats {
  double loss_sum = 0.0;  // summed cross-entropy over counted targets
  int64_t count = 0;      // targets that count (target != -1)
  int64_t correct = 0;    // argmax == target among them
  // Summed log Z = log sum_j exp(logit_j) over the same counted positions
  // (Wortsman et al. 2023's output-logit divergence).
  double log_z_sum = 0.0;
  double log_z_sq_sum = 0.0;  // summed (log Z)^2, for the z-loss
  double mean() const { return count > 0 ? loss_sum / static_cast<double>(count) : 0.0; }
  // The z-loss term z_loss * mean (log Z)^2 (Wortsman et al. 2023).
  double z_term(double z_loss) const { return count > 0 ? z_loss * log_z_sq_sum / static_cast<double>(count) : 0.0; }
  double mean_log_z() const { return count > 0 ? log_z_sum / static_cast<double>(count) : 0.0; }
  LossStats& operator+=(const LossStats& o) {
    loss_sum += o.loss_sum;
    count += o.count;
    correct += o.correct;
    log_z_sum += o.log_z_sum;
    log_z_sq_sum += o.log_z_sq_sum;
    return *this;
  }
};

struct OptimizerStepArgs {
  int step = 1;             // 1-based, for Adam's bias correction
  double lr = 0.0;
  double grad_scale = 1.0;  // clipping: gradients are multiplied by this first
  // Also measure this step's update for LastUpdateSquaredNorms (a copy of
  // the weights and two reductions: the trainer asks only before an evaluation).
  bool measure_update = false;
};

// Per tensor, in layout().tensors() order: squared L2 norms of one
// optimizer step's update (weights after minus before) and of the weights
// before it, so RMS(update) / RMS(weight) = sqrt(update[t] / weight[t]).
struct UpdateSquaredNorms {
  std::vector<double> update, weight;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;       // "cpu", "cuda:0"
  virtual std::string precision() const = 0;  // "fp32", ...
  // What computes: the CPU kernel variant and matrix product ("avx512, gemm
  // openblas (core SkylakeX)"); "" where there is no such choice.
  virtual std::string kernels() const { return ""; }
  virtual const ParamLayout& layout() const = 0;

  // Host copies in and out, each of layout().total() floats.
  virtual Status SetParameters(const std::vector<float>& host) = 0;
  virtual Status GetParameters(std::vector<float>* host) = 0;
  virtual Status GetGradients(std::vector<float>* host) = 0;
  // Optimizer moments: Adam's m and v; SGD's momentum buffer is m, v unused.
  virtual Status SetOptimizerState(const std::vector<float>& m, const std::vector<float>& v) = 0;
  virtual Status GetOptimizerState(std::vector<float>* m, std::vector<float>* v) = 0;

  // Forward and backward in training mode (dropout on when configured, with
  // masks drawn from dropout_seed). Gradients are overwritten, not added to.
  // They are of the mean cross-entropy plus, with options.z_loss > 0, the
  // z term (LossStats::z_term); the returned stats' loss is the cross-entropy.
  virtual StatusOr<LossStats> ForwardBackward(const Batch& batch, uint64_t dropout_seed) = 0;
  // Forward only, no dropout. With options.diagnostics it also keeps, per
  // block, the largest attention logit it saw (TakeMaxAttentionLogits).
  virtual StatusOr<LossStats> Evaluate(const Batch& batch) = 0;
  // Per block, the largest attention logit q.k / sqrt(d_head) over the heads
  // and causally visible (query, key) pairs of every Evaluate since the last
  // call, which starts afresh; -infinity for a block nothing was evaluated
  // for (and for every block without options.diagnostics).
  virtual StatusOr<std::vector<double>> TakeMaxAttentionLogits() = 0;
  // Squared L2 norm of each tensor's gradient, in layout().tensors() order.
  virtual StatusOr<std::vector<double>> GradientSquaredNorms() = 0;
  virtual Status OptimizerStep(const OptimizerStepArgs& args) = 0;
  // Of the last OptimizerStep with measure_update (INTERNAL when there was none).
  virtual StatusOr<UpdateSquaredNorms> LastUpdateSquaredNorms() = 0;
};

struct BackendOptions {
  std::string device = "cpu";  // "cpu" or "cuda:N"
  Precision precision = Precision::kFp32;
  int threads = 1;
  ModelConfig model;
  OptimizerConfig optimizer;
  int max_batch_size = 1;  // largest batch the backend must hold activations for
  bool diagnostics = true;  // Evaluate records the attention logits' maxima
  double z_loss = 0.0;  // ForwardBackward's gradient includes z_loss * mean (log Z)^2
};

// Checks a batch against the model: shape, token and target ranges. Each
// backend calls it before touching its buffers.
Status CheckBatch(const Batch& batch, const ModelConfig& model);

// Makes the backend for options.device; INVALID_ARGUMENT names "device" when
// it is unknown or not built in.
StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendOptions& options);

// Devices this build can use, e.g. {"cpu"} or {"cpu", "cuda:0 (NVIDIA H200)"}.
std::vector<std::string> ListDevices();

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_BACKEND_H_
