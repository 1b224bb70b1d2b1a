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

double RAdamRho(double beta2, int step) {
  const double rho_inf = 2.0 / (1.0 - beta2) - 1.0;
  const double b2t = std::pow(beta2, step);
  return rho_inf - 2.0 * step * b2t / (1.0 - b2t);
}

RAdamCoefficients RAdamFor(const OptimizerConfig& c, const OptimizerStepArgs& a, double weight_decay) {
  const double bc1 = 1.0 - std::pow(c.beta1, a.step);
  const double bc2 = 1.0 - std::pow(c.beta2, a.step);
  const double rho_inf = 2.0 / (1.0 - c.beta2) - 1.0;
  const double rho_t = RAdamRho(c.beta2, a.step);
  RAdamCoefficients k;
  k.b1 = static_cast<float>(c.beta1);
  k.b2 = static_cast<float>(c.beta2);
  k.eps = static_cast<float>(c.eps);
  k.l2 = static_cast<float>(weight_decay);
  k.grad_scale = static_cast<float>(a.grad_scale);
  k.rectified = rho_t > kRAdamRhoThreshold;
  if (k.rectified) {
    const double rect =
        std::sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t));
    k.step_size = static_cast<float>(a.lr * rect * std::sqrt(bc2) / bc1);
  } else {
    k.step_size = static_cast<float>(a.lr / bc1);
  }
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
    case OptimizerKind::kRAdam: {
      const RAdamCoefficients k = RAdamFor(c, a, weight_decay);
      // The moments as adam's; the step uses v only once rectified.
#pragma omp simd
      for (size_t i = 0; i < n; ++i) {
        const float grad = g[i] * k.grad_scale + k.l2 * p[i];
        m[i] = k.b1 * m[i] + (1.0f - k.b1) * grad;
        v[i] = k.b2 * v[i] + (1.0f - k.b2) * grad * grad;
      }
      if (k.rectified) {
#pragma omp simd
        for (size_t i = 0; i < n; ++i) p[i] -= k.step_size * m[i] / (std::sqrt(v[i]) + k.eps);
      } else {
#pragma omp simd
        for (size_t i = 0; i < n; ++i) p[i] -= k.step_size * m[i];
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
