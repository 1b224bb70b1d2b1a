#include "proto/schema/failure.h"

#include <cmath>

namespace normsweep::schema {

bool FailedToTrain(TrainingFailure label) {
  return label != TrainingFailure::kNone && label != TrainingFailure::kNotConverged;
}

std::optional<TrainingFailure> ClassifyTraining(v1::TrialState state, std::optional<double> final_val_loss,
                                                std::optional<double> unigram_loss,
                                                std::optional<double> val_loss_progress,
                                                std::optional<double> max_val_loss) {
  if (state == v1::TRIAL_DIVERGED) return TrainingFailure::kDiverged;
  if (state != v1::TRIAL_SUCCEEDED) return std::nullopt;
  if (!final_val_loss.has_value() || !std::isfinite(*final_val_loss)) return TrainingFailure::kNoFiniteLoss;
  const bool near_unigram = unigram_loss.has_value() && std::isfinite(*unigram_loss) &&
                            *final_val_loss > *unigram_loss - kPlateauMargin;
  const bool learning = val_loss_progress.has_value() && std::isfinite(*val_loss_progress) &&
                        *val_loss_progress >= kProgressMargin;
  if (near_unigram && !learning) return TrainingFailure::kPlateau;
  if (max_val_loss.has_value() && *final_val_loss > *max_val_loss) return TrainingFailure::kAboveMaxValLoss;
  if (near_unigram) return TrainingFailure::kNotConverged;
  return TrainingFailure::kNone;
}

std::optional<TrainingFailure> ClassifyTraining(const v1::Trial& trial, std::optional<double> max_val_loss) {
  const v1::TrialResult& r = trial.result();
  auto opt = [](bool has, double v) { return has ? std::optional<double>(v) : std::nullopt; };
  return ClassifyTraining(trial.state(), opt(r.has_final_val_loss(), r.final_val_loss()),
                          opt(r.has_unigram_loss(), r.unigram_loss()),
                          opt(r.has_val_loss_progress(), r.val_loss_progress()), max_val_loss);
}

std::string_view FailureName(TrainingFailure failure) {
  switch (failure) {
    case TrainingFailure::kNone: return "";
    case TrainingFailure::kDiverged: return "diverged";
    case TrainingFailure::kNoFiniteLoss: return "no_finite_loss";
    case TrainingFailure::kPlateau: return "plateau";
    case TrainingFailure::kAboveMaxValLoss: return "above_max_val_loss";
    case TrainingFailure::kNotConverged: return "not_converged";
  }
  return "";
}

}  // namespace normsweep::schema
