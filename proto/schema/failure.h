// What "failed to train" means, the one rule for every reader of results:
// the views (the SQL function normsweep_trial_failure, db/views), the
// boundary search (ClassifyProbe), the report's "first failure", `normsweep
// results` and the docs.
//
// Only trials that ran to their end are judged: SUCCEEDED or DIVERGED. Such
// a trial failed to train when
//   diverged            it DIVERGED (a NaN or infinite loss, or the loss
//                        above the trainer's divergence threshold);
//   no_finite_loss      it SUCCEEDED without a finite final validation loss;
//   plateau             its final validation loss is above
//                        unigram_loss - kPlateauMargin: it learnt no more
//                        than which tokens are common (Post-LN without
//                        warm-up at a large lr stalls exactly there, Xiong
//                        et al. 2020) or, slower still, not even that;
//   above_max_val_loss  a boundary search's max_val_loss is set and the
//                        final validation loss is above it.
// A trial without a unigram loss (a worker or trainer older than the field)
// is judged by the other rules alone.
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

enum class TrainingFailure { kNone, kDiverged, kNoFiniteLoss, kPlateau, kAboveMaxValLoss };

// nullopt: not judged (PENDING, RUNNING, FAILED, CANCELLED).
std::optional<TrainingFailure> ClassifyTraining(v1::TrialState state, std::optional<double> final_val_loss,
                                                std::optional<double> unigram_loss,
                                                std::optional<double> max_val_loss);
// The same from a trial as the API returns it (max_val_loss: the sweep's
// boundary search's, when set).
std::optional<TrainingFailure> ClassifyTraining(const v1::Trial& trial, std::optional<double> max_val_loss);

// "" for kNone; "diverged", "no_finite_loss", "plateau", "above_max_val_loss"
// as the views spell them.
std::string_view FailureName(TrainingFailure failure);

}  // namespace normsweep::schema

#endif  // NORMSWEEP_PROTO_SCHEMA_FAILURE_H_
