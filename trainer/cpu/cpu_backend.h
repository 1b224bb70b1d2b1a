// The CPU backend: OpenBLAS sgemm for the matrix products and our own
// OpenMP kernels (trainer/cpu/ops.h) for the rest. Owned and used by one
// thread; it sets the OpenMP and BLAS thread counts of its process.
#ifndef NORMSWEEP_TRAINER_CPU_CPU_BACKEND_H_
#define NORMSWEEP_TRAINER_CPU_CPU_BACKEND_H_

#include <memory>
#include <vector>

#include "trainer/backend.h"

namespace normsweep::trainer::cpu {

class CpuBackend final : public Backend {
 public:
  static StatusOr<std::unique_ptr<Backend>> Create(const BackendOptions& options);

  std::string name() const override { return "cpu"; }
  std::string precision() const override { return "fp32"; }
  const ParamLayout& layout() const override { return layout_; }

  Status SetParameters(const std::vector<float>& host) override;
  Status GetParameters(std::vector<float>* host) override;
  Status GetGradients(std::vector<float>* host) override;
  Status SetOptimizerState(const std::vector<float>& m, const std::vector<float>& v) override;
  Status GetOptimizerState(std::vector<float>* m, std::vector<float>* v) override;

  StatusOr<LossStats> ForwardBackward(const Batch& batch, uint64_t dropout_seed) override;
  StatusOr<LossStats> Evaluate(const Batch& batch) override;
  StatusOr<std::vector<double>> GradientSquaredNorms() override;
  Status OptimizerStep(const OptimizerStepArgs& args) override;

 private:
  // Saved activations of one block, each (N, ...) for N = B*T rows.
  struct BlockActivations {
    float* x_in = nullptr;  // the block's input (the previous block's output)
    float *ln1_out, *ln1_mean, *ln1_rstd;
    float *qkv, *att, *atty, *attn_out, *res1;
    float *ln2_out, *ln2_mean, *ln2_rstd;
    float *fc1_act, *ffn_out, *res2;
    float *attn_mask, *ffn_mask;  // dropout keep masks, when dropout > 0
    const float* out() const;     // Post-LN: ln2_out; Pre-LN: res2
    bool pre_ln = false;
  };

  CpuBackend(const BackendOptions& options);
  void EnsureCapacity(int B);
  // Runs the forward pass for batch, saving activations; fills probs.
  LossStats Forward(const Batch& batch, bool training, uint64_t dropout_seed);
  void Backward(const Batch& batch, int64_t count);

  BackendOptions options_;
  ModelConfig model_;
  ParamLayout layout_;
  std::vector<float> params_, grads_, m_, v_;
  std::vector<float> sin_pos_;  // (T, C) sinusoidal table

  int capacity_b_ = 0;
  std::vector<float> arena_;
  float *emb_out_ = nullptr, *emb_mask_ = nullptr;
  std::vector<BlockActivations> blocks_;
  float *lnf_out_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
  float *logits_ = nullptr, *probs_ = nullptr, *row_loss_ = nullptr;
  float *d_a_ = nullptr, *d_b_ = nullptr, *d_c_ = nullptr, *d_d_ = nullptr, *d_qkv_ = nullptr,
        *d_act_ = nullptr;
  bool dropout_active_ = false;
};

}  // namespace normsweep::trainer::cpu

#endif  // NORMSWEEP_TRAINER_CPU_CPU_BACKEND_H_
