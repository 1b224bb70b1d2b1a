#include "trainer/optimizer.h"

#include <cmath>

namespace normsweep::trainer {

AdamCoefficients AdamFor(const OptimizerConfig& c, const OptimizerStepArgs& a, double weight_decay) {
  const bool decoupled = c.kind == OptimizerKind::kAdamW;
  const float lr = static_cast<float>(a.lr);
  const double bc1 = 1.0 - std::pow(c.beta1, a.step);
  const double bc2 = 1.0 - std::pow(c.beta2, a.step);
  AdamCoefficients k;
  k.b1 = static_cast<float>(c.beta1);
  k.b2 = static_cast<float>(c.beta2);
  k.eps = static_cast<float>(c.eps);
  k.l2 = decoupled ? 0.0f : static_cast<float>(weight_decay);
  k.decay = decoupled ? 1.0f - lr * static_cast<float>(weight_decay) : 1.0f;
  k.step_size = static_cast<float>(a.lr / bc1);
  k.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  k.grad_scale = static_cast<float>(a.grad_scale);
  return k;
}

SgdCoefficients SgdFor(const OptimizerConfig& c, const OptimizerStepArgs& a, double weight_decay) {
  return SgdCoefficients{static_cast<float>(a.lr), static_cast<float>(c.momentum), static_cast<float>(weight_decay),
                         static_cast<float>(a.grad_scale)};
}

void OptimizerUpdate(const OptimizerConfig& c, const OptimizerStepArgs& a, double weight_decay, float* p,
                     const float* g, float* m, float* v, size_t n) {
  switch (c.kind) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {
      const AdamCoefficients k = AdamFor(c, a, weight_decay);
#pragma omp simd
      for (size_t i = 0; i < n; ++i) {
        const float grad = g[i] * k.grad_scale + k.l2 * p[i];
        const float mi = k.b1 * m[i] + (1.0f - k.b1) * grad;
        const float vi = k.b2 * v[i] + (1.0f - k.b2) * grad * grad;
        m[i] = mi;
        v[i] = vi;
        const float denom = std::sqrt(vi) * k.inv_sqrt_bc2 + k.eps;
        p[i] = p[i] * k.decay - k.step_size * mi / denom;
      }
      break;
    }
    case OptimizerKind::kSgd: {
      const SgdCoefficients k = SgdFor(c, a, weight_decay);
      for (size_t i = 0; i < n; ++i) {
        float grad = g[i] * k.grad_scale + k.wd * p[i];
        if (k.momentum > 0.0f) {
          m[i] = k.momentum * m[i] + grad;
          grad = m[i];
        }
        p[i] -= k.lr * grad;
      }
      break;
    }
  }
}

}  // namespace normsweep::trainer
