// What SubmitSweep tells a submitter about a sweep besides its cost
// (cost_estimate.h): the expanded grid (SubmitSweepResponse.axes and
// groups) and the warnings, settings that may not be what the user meant
// (SubmitSweepResponse.warnings), which stop a submit without
// allow_warnings. Pure functions over a ValidSpec and the trials ExpandSweep
// made of it; no I/O.
#ifndef NORMSWEEP_SCHEDULER_SWEEP_PREVIEW_H_
#define NORMSWEEP_SCHEDULER_SWEEP_PREVIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "db/store.h"
#include "normsweep/v1/sweep_service.pb.h"
#include "scheduler/sweep_spec.h"

namespace normsweep::scheduler {

// A sweep of more trials than this gets a warning.
inline constexpr int64_t kWarnTrialsAbove = 1000;

// The axes in expansion order, outermost first: seed, the extra axes (by
// their TrainConfig field), warmup_steps, peak_lr, placement (innermost).
// Values as the trials get them: numbers in their shortest text,
// placements by canonical name. A random search says how warmup_steps and
// peak_lr are sampled; a boundary search how peak_lr is searched.
std::vector<v1::GridAxis> GridAxes(const ValidSpec& spec);

// Trials per (placement, variant), in the order the trials first reach each.
std::vector<v1::GridGroup> GridGroups(const std::vector<db::NewTrial>& trials);

// Each warning a sentence that names the field and its value: a warm-up
// longer than its trials' run (warmup_steps > steps: the peak lr is never
// reached; a warm-up equal to the run is a deliberate ramp, as
// deploy/sweeps/paper.yaml's, and gets none), and more than
// kWarnTrialsAbove trials.
std::vector<std::string> SweepWarnings(const ValidSpec& spec, const std::vector<db::NewTrial>& trials);

// FAILED_PRECONDITION for a submit with warnings and without
// allow_warnings: lists them, says that nothing was stored and how to
// insist (`normsweep submit --force`, Python `force=True`).
absl::Status RefuseWarnings(const std::vector<std::string>& warnings);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_SWEEP_PREVIEW_H_
