#include "trainer/schedule.h"

#include <algorithm>
#include <cmath>

namespace normsweep::trainer {

double LearningRate(const ScheduleConfig& s, int step) {
  const double t = std::max(step, 1);
  const double w = s.warmup_steps;
  if (s.warmup_steps > 0 && t <= w) return s.peak_lr * t / w;
  const double total = std::max(s.total_steps, 1);
  switch (s.kind) {
    case ScheduleKind::kConstant:
      return s.peak_lr;
    case ScheduleKind::kInverseSqrt:
      return s.peak_lr * std::sqrt(std::max(w, 1.0) / t);
    case ScheduleKind::kLinear: {
      if (total <= w) return s.peak_lr;
      return s.peak_lr * std::max(0.0, (total - t) / (total - w));
    }
    case ScheduleKind::kCosine: {
      if (total <= w) return s.peak_lr;
      const double progress = std::min(1.0, (t - w) / (total - w));
      return s.peak_lr * 0.5 * (1.0 + std::cos(M_PI * progress));
    }
  }
  return s.peak_lr;
}

}  // namespace normsweep::trainer
