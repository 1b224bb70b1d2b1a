// What `normsweep list`, `show ID` and `trial ID` print: the sweeps table,
// one sweep with its trials, one trial with its metric history, step-0
// gradient norms and attempts. Pure functions, so tests need no scheduler.
#ifndef NORMSWEEP_CLIENT_SWEEP_TABLES_H_
#define NORMSWEEP_CLIENT_SWEEP_TABLES_H_

#include <optional>
#include <string>
#include <vector>

#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::client {

// The states as the CLI prints them: "running", "completed", "cancelled";
// "pending", ..., "cancelled"; "unknown" for anything else.
std::string SweepStateLabel(v1::SweepState state);
std::string TrialStateLabel(v1::TrialState state);

// `normsweep list`: a header and one line per sweep, in the given order:
//   id     name                         state       trials   done diverged  failed  created
std::string RenderSweepList(const std::vector<v1::Sweep>& sweeps);

// `normsweep show ID`: the sweep's counts, then one line per trial (its
// final validation loss, or the last one in parentheses while it runs; the
// data's unigram loss; whether it failed to train by the one rule,
// proto/schema/failure.h: "-" trained, else "diverged", "plateau", ...,
// blank while it is not judged; its error or divergence step as the note).
std::string RenderSweepDetail(const v1::Sweep& sweep, const std::vector<v1::Trial>& trials);

// Which metric points `normsweep trial` prints (a run has thousands).
struct MetricRows {
  int every = 0;  // > 0: the steps that are multiples of it, and the last point
  int tail = 0;   // > 0: the last `tail` points (of those `every` keeps)
};

// `normsweep trial ID`: the trial, each setting said once (its
// normalisation settings where they are not the defaults: Mix-LN's fraction,
// rmsnorm, qk_norm, z_loss; then the rest of its variant), l0
// (result.init_val_loss, else the step-0 evaluation), its metric points
// (with log Z when the trial has it; the rows chosen by `rows`, and a line
// saying how many were left out), its FFN gradient norms at the first and
// last step they were taken, the per-block diagnostics at step 0 and at the
// last evaluation, and its attempts (RenderAttemptsTable).
std::string RenderTrialDetail(const v1::GetTrialResponse& trial, std::optional<double> max_val_loss = std::nullopt,
                              const MetricRows& rows = {});

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_SWEEP_TABLES_H_
