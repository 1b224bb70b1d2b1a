// What "failed to train" means, the one rule for every reader of results:
// the views (the SQL function normsweep_training_failure, db/views), the
// boundary search (ClassifyProbe), the report's "first failure", `normsweep
// results` and the docs.
//
// Only trials that ran to their end are judged: SUCCEEDED or DIVERGED. Such
// a trial failed to train when
//   diverged            it DIVERGED (a NaN or infinite loss, or the loss
//                        above the trainer's divergence threshold);
//   no_finite_loss      it SUCCEEDED without a finite final validation loss;
//   plateau             its final validation loss is above
//                        unigram_loss - kPlateauMargin and it has stopped
//                        improving there (val_loss_progress below
//                        kProgressMargin, or not judged): it learnt no more
//                        than which tokens are common (Post-LN without
//                        warm-up at a large lr stalls exactly there, Xiong
//                        et al. 2020) or, slower still, not even that;
//   above_max_val_loss  a boundary search's max_val_loss is set and the
//                        final validation loss is above it.
// One more label is not a failure:
//   not_converged       it ended near the unigram loss (as a plateau) but
//                        was still learning: val_loss_progress, the fall of
//                        the validation loss over the run's last quarter, is
//                        at least kProgressMargin. A longer run would tell;
//                        the boundary search counts it as trainable.
// val_loss_progress is computed by the trainer (trainer/settings/val_loss_progress.h)
// and, for trials stored before it reported it, by
// db/tools/recompute_val_loss_progress.sql from their stored metrics.
// A trial without a unigram loss (a worker or trainer older than the field)
// is judged by the other rules alone; one without val_loss_progress (fewer
// than 3 evaluations, or older than the field) by the plateau rule alone.
#ifndef NORMSWEEP_PROTO_SCHEMA_FAILURE_H_
#define NORMSWEEP_PROTO_SCHEMA_FAILURE_H_

#include <optional>
#include <string_view>

#include "normsweep/v1/sweep.pb.h"

namespace normsweep::schema {

// Nats: a run must end at least this far below the unigram loss to count as
// trained. The paper sweep's stalled Post-LN runs end within 0.04 of it
// (3.41-3.45 against 3.41) and its trained runs 0.5 or more below it.
inline constexpr double kPlateauMargin = 0.1;

// Nats: a run near the unigram loss whose validation loss still fell by at
// least this much over its last quarter (val_loss_progress) is learning, not
// stalled. Chosen from data (docs/sweeps.md#failing-to-train): the flat
// plateaus of the paper sweep and of the norms comparison's plateaued cells
// "fall" by at most 0.083 (evaluation noise at lr 1e-1), an 80-step Pre-LN
// run still falling at its end by 0.23. Calling a stall "not converged"
// would hide the failure the paper is about, so the margin sits well above
// the noise rather than midway.
inline constexpr double kProgressMargin = 0.15;

enum class TrainingFailure { kNone, kDiverged, kNoFiniteLoss, kPlateau, kAboveMaxValLoss, kNotConverged };

// Whether the label is a failure to train: kNone and kNotConverged are not.
bool FailedToTrain(TrainingFailure label);

// nullopt: not judged (PENDING, RUNNING, FAILED, CANCELLED).
std::optional<TrainingFailure> ClassifyTraining(v1::TrialState state, std::optional<double> final_val_loss,
                                                std::optional<double> unigram_loss,
                                                std::optional<double> val_loss_progress,
                                                std::optional<double> max_val_loss);
// The same from a trial as the API returns it (max_val_loss: the sweep's
// boundary search's, when set).
std::optional<TrainingFailure> ClassifyTraining(const v1::Trial& trial, std::optional<double> max_val_loss);

// "" for kNone; "diverged", "no_finite_loss", "plateau", "above_max_val_loss",
// "not_converged" as the views spell them.
std::string_view FailureName(TrainingFailure failure);

}  // namespace normsweep::schema

#endif  // NORMSWEEP_PROTO_SCHEMA_FAILURE_H_
