// The pieces of ExpandSweep (sweep_expander.h), exposed for tests. ExpandSweep
// first validates the spec (scheduler/validation.h: ValidateSweepSpec, which
// also parses the extra axes and counts the trials), then builds the (warm-up,
// lr) settings and the trials from them.
#ifndef NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_INTERNAL_H_
#define NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_INTERNAL_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "db/store.h"
#include "normsweep/v1/sweep.pb.h"
#include "scheduler/validation.h"

namespace normsweep::scheduler::internal {

// The (warm-up, lr) settings: the warmup_steps x peak_lrs grid (warm-up
// outer), or random_search's samples (lr log-uniform, warm-up uniform;
// deterministic for a given seed on every platform).
using WarmupLr = std::pair<int32_t, double>;
std::vector<WarmupLr> GridSettings(const v1::SweepSpec& spec);
std::vector<WarmupLr> SampleRandomSearch(const v1::RandomSearch& random_search);

// One trial per seed x extra-axis variant x setting x placement, in that
// order (placement innermost), each config resolved; an error for a config
// the trainer refuses or two trials of one resolved config
// (DistinctTrialConfigs).
absl::StatusOr<std::vector<db::NewTrial>> ExpandTrials(const v1::SweepSpec& spec,
                                                       const std::vector<WarmupLr>& settings,
                                                       const std::vector<std::vector<AxisValue>>& extra,
                                                       int64_t trial_count);

// The coarse settings of a boundary search: warmup_steps x its initial lrs
// (proto/schema/boundary_search.h).
std::vector<WarmupLr> BoundarySettingsGrid(const v1::SweepSpec& spec);
// Sets boundary_line on trials expanded from BoundarySettingsGrid: a line is
// a (seed, variant, warm-up, placement), numbered in the trials' order.
void AssignBoundaryLines(const v1::SweepSpec& spec, std::vector<db::NewTrial>& trials);

}  // namespace normsweep::scheduler::internal

#endif  // NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_INTERNAL_H_
