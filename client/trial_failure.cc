#include "client/trial_failure.h"

#include "absl/strings/str_cat.h"

namespace normsweep::client {

std::optional<double> FailureMaxValLoss(const v1::SweepSpec& spec) {
  if (!spec.has_boundary_search() || !spec.boundary_search().has_max_val_loss()) return std::nullopt;
  return spec.boundary_search().max_val_loss();
}

std::optional<schema::TrainingFailure> TrialFailure(const v1::Trial& trial, std::optional<double> max_val_loss) {
  return schema::ClassifyTraining(trial, max_val_loss);
}

std::string FailureColumn(const v1::Trial& trial, std::optional<double> max_val_loss) {
  const std::optional<schema::TrainingFailure> f = TrialFailure(trial, max_val_loss);
  if (!f.has_value()) return "";
  if (*f == schema::TrainingFailure::kNone) return "-";
  return std::string(schema::FailureName(*f));
}

std::string FailureCause(const v1::Trial& trial, schema::TrainingFailure failure) {
  switch (failure) {
    case schema::TrainingFailure::kNone: return "";
    case schema::TrainingFailure::kDiverged:
      return trial.result().has_diverged_step() ? absl::StrCat("diverged after step ", trial.result().diverged_step())
                                                : "diverged";
    case schema::TrainingFailure::kNoFiniteLoss: return "no finite loss";
    case schema::TrainingFailure::kPlateau: return "plateau";
    case schema::TrainingFailure::kAboveMaxValLoss: return "above max_val_loss";
    case schema::TrainingFailure::kNotConverged: return "not converged (still learning)";
  }
  return "";
}

}  // namespace normsweep::client
