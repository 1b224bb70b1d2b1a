// Reference optimizer updates on flat float arrays (the CPU backend runs
// these; the CUDA backend's kernels must match them).
//   adam:  g' = g*s + wd*p;           m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2
//          p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)     (PyTorch Adam)
//   adamw: as adam with wd = 0 in g', then p -= lr * wd * p first      (PyTorch AdamW)
//   radam: g', m, v as adam; rho_inf = 2/(1-b2) - 1, rho_t = rho_inf - 2t b2^t/(1-b2^t);
//          rho_t > 5: p -= lr * r_t * (m / (1-b1^t)) * sqrt(1-b2^t) / (sqrt(v) + eps),
//                     r_t = sqrt((rho_t-4)(rho_t-2) rho_inf / ((rho_inf-4)(rho_inf-2) rho_t))
//          else:      p -= lr * m / (1-b1^t)                             (PyTorch 1.13 RAdam)
//          Liu et al. 2019 (arXiv 1908.03265) rectify when rho_t > 4; torch 1.13's
//          threshold is 5 and we match torch: with b2 = 0.98, step 5 (rho 4.92)
//          is the last un-adapted step. eps is added to sqrt(v) before the bias
//          correction (torch's single-tensor code), unlike adam's.
//   sgd:   g' = g*s + wd*p; m = mu m + g' (mu > 0); p -= lr * (mu > 0 ? m : g')
// s is the clipping scale. Weight decay applies to tensors with decay = true.
#ifndef NORMSWEEP_TRAINER_OPTIMIZER_H_
#define NORMSWEEP_TRAINER_OPTIMIZER_H_

#include <cstddef>

#include "trainer/backend.h"
#include "trainer/settings/config.h"

namespace normsweep::trainer {

// The per-step scalars of each update, in float, as both backends use them.
struct AdamCoefficients {
  float b1, b2, eps, l2, decay, step_size, inv_sqrt_bc2, grad_scale;
};
AdamCoefficients AdamFor(const OptimizerConfig& config, const OptimizerStepArgs& args, double weight_decay);
// RAdam's step: rectified ? p -= step_size * m / (sqrt(v) + eps)
//                          : p -= step_size * m.
struct RAdamCoefficients {
  float b1, b2, eps, l2, step_size, grad_scale;
  bool rectified;
};
RAdamCoefficients RAdamFor(const OptimizerConfig& config, const OptimizerStepArgs& args, double weight_decay);
// rho_t above, in double (t = step, 1-based).
double RAdamRho(double beta2, int step);
inline constexpr double kRAdamRhoThreshold = 5.0;  // torch.optim.RAdam: rectify when rho_t > 5
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
