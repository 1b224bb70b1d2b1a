#include "trainer/optimizer.h"

#include <cmath>

namespace normsweep::trainer {

void OptimizerUpdate(const OptimizerConfig& c, const OptimizerStepArgs& a, double weight_decay, float* p,
                     const float* g, float* m, float* v, size_t n) {
  const float scale = static_cast<float>(a.grad_scale);
  const float lr = static_cast<float>(a.lr);
  switch (c.kind) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {
      const bool decoupled = c.kind == OptimizerKind::kAdamW;
      const float b1 = static_cast<float>(c.beta1), b2 = static_cast<float>(c.beta2);
      const float eps = static_cast<float>(c.eps);
      const float l2 = decoupled ? 0.0f : static_cast<float>(weight_decay);
      const float decay = decoupled ? 1.0f - lr * static_cast<float>(weight_decay) : 1.0f;
      const double bc1 = 1.0 - std::pow(c.beta1, a.step);
      const double bc2 = 1.0 - std::pow(c.beta2, a.step);
      const float step_size = static_cast<float>(a.lr / bc1);
      const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
#pragma omp simd
      for (size_t i = 0; i < n; ++i) {
        const float grad = g[i] * scale + l2 * p[i];
        const float mi = b1 * m[i] + (1.0f - b1) * grad;
        const float vi = b2 * v[i] + (1.0f - b2) * grad * grad;
        m[i] = mi;
        v[i] = vi;
        const float denom = std::sqrt(vi) * inv_sqrt_bc2 + eps;
        p[i] = p[i] * decay - step_size * mi / denom;
      }
      break;
    }
    case OptimizerKind::kSgd: {
      const float mu = static_cast<float>(c.momentum);
      const float wd = static_cast<float>(weight_decay);
      for (size_t i = 0; i < n; ++i) {
        float grad = g[i] * scale + wd * p[i];
        if (mu > 0.0f) {
          m[i] = mu * m[i] + grad;
          grad = m[i];
        }
        p[i] -= lr * grad;
      }
      break;
    }
  }
}

}  // namespace normsweep::trainer
