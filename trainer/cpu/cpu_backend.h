// The CPU backend: OpenBLAS sgemm for the matrix products and our own
// OpenMP kernels (trainer/cpu/ops.h) for the rest. Owned and used by one
// thread; it sets the OpenMP and BLAS thread counts of its process.
//
// A training step is data-parallel over the batch: the batch's sequences are
// cut into one contiguous part per thread, each thread takes its part through
// forward and backward alone (single-threaded kernels and sgemm, its own
// activations and weight gradients), and the parts' gradients are then summed
// in part order. The model is small, so per-op threading spent a fifth of a
// step in OpenMP barriers between ~100 short kernels and ran sgemm at 2/3 of
// its single-thread speed per core; with parts there is one barrier a step.
// The result depends only on the number of parts, min(threads, batch size).
#ifndef NORMSWEEP_TRAINER_CPU_CPU_BACKEND_H_
#define NORMSWEEP_TRAINER_CPU_CPU_BACKEND_H_

#include <memory>
#include <vector>

#include "trainer/backend.h"
#include "trainer/program/activations.h"

namespace normsweep::trainer::cpu {

class CpuBackend final : public Backend {
 public:
  static StatusOr<std::unique_ptr<Backend>> Create(const BackendOptions& options);

  std::string name() const override { return "cpu"; }
  std::string kernels() const override;
  std::string precision() const override { return "fp32"; }
  const ParamLayout& layout() const override { return layout_; }

  Status SetParameters(const std::vector<float>& host) override;
  Status GetParameters(std::vector<float>* host) override;
  Status GetGradients(std::vector<float>* host) override;
  Status SetOptimizerState(const std::vector<float>& m, const std::vector<float>& v) override;
  Status GetOptimizerState(std::vector<float>* m, std::vector<float>* v) override;

  StatusOr<LossStats> ForwardBackward(const Batch& batch, uint64_t dropout_seed) override;
  StatusOr<LossStats> Evaluate(const Batch& batch) override;
  StatusOr<std::vector<double>> TakeMaxAttentionLogits() override;
  // Computed by ForwardBackward, while it sums the parts' gradients.
  StatusOr<std::vector<double>> GradientSquaredNorms() override;
  Status OptimizerStep(const OptimizerStepArgs& args) override;
  StatusOr<UpdateSquaredNorms> LastUpdateSquaredNorms() override;

 private:
  // Sequences [b0, b1) of a batch, taken by one part.
  struct Slice {
    int b0 = 0, b1 = 0;
  };

  // The buffers one thread works in: the block program's activations and
  // scratch for up to part_capacity_ sequences, in one arena, and the
  // part's weight gradients (part 0 writes grads_ directly, so its own
  // buffer stays empty).
  struct Part {
    std::vector<float> arena;
    Activations acts;
    std::vector<float> grads;
    // Attention-logit maxima when record_attn_max_: per (sequence, head) of
    // one block, and per block over the part's forward passes.
    std::vector<float> head_max;
    std::vector<float> block_max;
  };
  // The ops of one part's pass (cpu_backend.cc): the kernels of
  // trainer/cpu/ops.h on the part's rows, single-threaded.
  class PartOps;

  CpuBackend(const BackendOptions& options);
  void EnsureCapacity(int B);
  // The batch's sequences cut into min(threads, B) contiguous parts.
  std::vector<Slice> SplitBatch(int B) const;
  // The block program on one part's sequences: the forward pass, with
  // dropout when training_ and the model has it (masks drawn from dropout_seed),
  // then with G the backward pass into the weight gradients G (layout
  // order); count is the whole batch's target count, which the mean loss
  // divides by.
  LossStats RunPart(Part& part, const Batch& batch, Slice s, uint64_t dropout_seed, int64_t count, float* G);
  // The squared norms of the update OptimizerStep just made (from weights_before_).
  void MeasureUpdate();

  BackendOptions options_;
  ModelConfig model_;
  ParamLayout layout_;
  std::vector<float> params_, grads_, m_, v_;
  std::vector<double> grad_sq_norms_;  // per tensor, from the last ForwardBackward
  std::vector<double> max_attn_logit_;  // per block, over the Evaluate calls since the last Take
  std::vector<float> weights_before_;  // scratch of a measured OptimizerStep
  UpdateSquaredNorms update_sq_;
  bool update_measured_ = false;
  std::vector<float> sin_pos_;         // (T, C) sinusoidal table

  int part_capacity_ = 0;  // sequences each part has buffers for
  std::vector<Part> parts_;
  bool training_ = false;  // set before a step's parallel region, read inside it
  bool record_attn_max_ = false;  // likewise: Forward keeps the attention-logit maxima
};

}  // namespace normsweep::trainer::cpu

#endif  // NORMSWEEP_TRAINER_CPU_CPU_BACKEND_H_
