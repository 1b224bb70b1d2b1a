#include "proto/schema/failure.h"

#include <cmath>

namespace normsweep::schema {

std::optional<TrainingFailure> ClassifyTraining(v1::TrialState state, std::optional<double> final_val_loss,
                                                std::optional<double> unigram_loss,
                                                std::optional<double> max_val_loss) {
  if (state == v1::TRIAL_DIVERGED) return TrainingFailure::kDiverged;
  if (state != v1::TRIAL_SUCCEEDED) return std::nullopt;
  if (!final_val_loss.has_value() || !std::isfinite(*final_val_loss)) return TrainingFailure::kNoFiniteLoss;
  if (unigram_loss.has_value() && std::isfinite(*unigram_loss) && *final_val_loss > *unigram_loss - kPlateauMargin) {
    return TrainingFailure::kPlateau;
  }
  if (max_val_loss.has_value() && *final_val_loss > *max_val_loss) return TrainingFailure::kAboveMaxValLoss;
  return TrainingFailure::kNone;
}

std::optional<TrainingFailure> ClassifyTraining(const v1::Trial& trial, std::optional<double> max_val_loss) {
  const v1::TrialResult& r = trial.result();
  return ClassifyTraining(trial.state(),
                          r.has_final_val_loss() ? std::optional<double>(r.final_val_loss()) : std::nullopt,
                          r.has_unigram_loss() ? std::optional<double>(r.unigram_loss()) : std::nullopt,
                          max_val_loss);
}

std::string_view FailureName(TrainingFailure failure) {
  switch (failure) {
    case TrainingFailure::kNone: return "";
    case TrainingFailure::kDiverged: return "diverged";
    case TrainingFailure::kNoFiniteLoss: return "no_finite_loss";
    case TrainingFailure::kPlateau: return "plateau";
    case TrainingFailure::kAboveMaxValLoss: return "above_max_val_loss";
  }
  return "";
}

}  // namespace normsweep::schema
