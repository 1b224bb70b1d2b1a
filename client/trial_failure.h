// The one rule for failing to train (proto/schema/failure.h) as the CLI and
// the report apply it to the trials the API returns: `normsweep show` and
// `normsweep trial` print each trial's cause, the report picks and names a
// placement's first failure.
#ifndef NORMSWEEP_CLIENT_TRIAL_FAILURE_H_
#define NORMSWEEP_CLIENT_TRIAL_FAILURE_H_

#include <optional>
#include <string>

#include "normsweep/v1/sweep.pb.h"
#include "proto/schema/failure.h"

namespace normsweep::client {

// The max_val_loss the rule reads: the sweep's boundary search's, when the
// sweep has one and sets it; nullopt otherwise.
std::optional<double> FailureMaxValLoss(const v1::SweepSpec& spec);

// The trial by the rule: nullopt when it is not judged (not SUCCEEDED or
// DIVERGED), kNone when it trained.
std::optional<schema::TrainingFailure> TrialFailure(const v1::Trial& trial, std::optional<double> max_val_loss);

// The `failure` column of `normsweep show`: "" not judged, "-" trained,
// else the rule's name ("diverged", "plateau", "no_finite_loss",
// "above_max_val_loss", or "not_converged", which is no failure).
std::string FailureColumn(const v1::Trial& trial, std::optional<double> max_val_loss);

// The cause in words, for the report's legend and `normsweep trial`:
// "plateau", "diverged after step 60" ("diverged" without a step), "no
// finite loss", "above max_val_loss", "not converged (still learning)". ""
// for kNone.
std::string FailureCause(const v1::Trial& trial, schema::TrainingFailure failure);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_TRIAL_FAILURE_H_
