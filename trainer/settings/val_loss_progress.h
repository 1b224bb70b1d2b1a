// How much a run was still learning at its end (TrainEvent.val_loss_progress;
// the failure rule's not_converged, proto/schema/failure.h). Header-only and
// dependency-free, for the trainer core and its tests.
#ifndef NORMSWEEP_TRAINER_SETTINGS_VAL_LOSS_PROGRESS_H_
#define NORMSWEEP_TRAINER_SETTINGS_VAL_LOSS_PROGRESS_H_

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

namespace normsweep::trainer {

// The validation loss at the last evaluation at or before step
// floor(0.75 * steps), minus the final evaluation's. evals: (step, val_loss)
// in step order, step 0 (l0) included, the last one the final evaluation.
// nullopt with fewer than 3 evaluations, or when that reference is step 0
// (evaluations too sparse: the fall from initialisation is no measure of the
// last quarter), or when the result is not finite.
inline std::optional<double> ValLossProgress(const std::vector<std::pair<int, double>>& evals, int steps) {
  if (evals.size() < 3) return std::nullopt;
  const long cut = (3L * steps) / 4;  // floor(0.75 * steps)
  std::optional<double> reference;
  int reference_step = 0;
  for (const auto& [step, loss] : evals) {
    if (step > cut) break;
    reference = loss;
    reference_step = step;
  }
  if (!reference.has_value() || reference_step == 0) return std::nullopt;
  const double progress = *reference - evals.back().second;
  if (!std::isfinite(progress)) return std::nullopt;
  return progress;
}

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_SETTINGS_VAL_LOSS_PROGRESS_H_
