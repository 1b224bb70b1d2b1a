// Reference optimizer updates on flat float arrays (the CPU backend runs
// these; the CUDA backend's kernels must match them).
//   adam:  g' = g*s + wd*p;           m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2
//          p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)     (PyTorch Adam)
//   adamw: as adam with wd = 0 in g', then p -= lr * wd * p first      (PyTorch AdamW)
//   sgd:   g' = g*s + wd*p; m = mu m + g' (mu > 0); p -= lr * (mu > 0 ? m : g')
// s is the clipping scale. Weight decay applies to tensors with decay = true.
#ifndef NORMSWEEP_TRAINER_OPTIMIZER_H_
#define NORMSWEEP_TRAINER_OPTIMIZER_H_

#include <cstddef>

#include "trainer/backend.h"
#include "trainer/config.h"

namespace normsweep::trainer {

// The per-step scalars of each update, in float, as both backends use them.
struct AdamCoefficients {
  float b1, b2, eps, l2, decay, step_size, inv_sqrt_bc2, grad_scale;
};
AdamCoefficients AdamFor(const OptimizerConfig& config, const OptimizerStepArgs& args, double weight_decay);
struct SgdCoefficients {
  float lr, momentum, wd, grad_scale;
};
SgdCoefficients SgdFor(const OptimizerConfig& config, const OptimizerStepArgs& args, double weight_decay);

// Updates params[0, n) in place. weight_decay is already 0 for tensors
// without decay. Safe to call on disjoint ranges from several threads.
void OptimizerUpdate(const OptimizerConfig& config, const OptimizerStepArgs& args, double weight_decay,
                     float* params, const float* grads, float* m, float* v, size_t n);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_OPTIMIZER_H_
