// The pieces of ExpandSweep (sweep_expander.h), exposed for tests: the
// (warm-up, lr) settings, then the trials from them.
#ifndef NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_INTERNAL_H_
#define NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_INTERNAL_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "db/store.h"
#include "normsweep/v1/sweep.pb.h"
#include "scheduler/sweep_spec.h"

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
// (DistinctTrialConfigs). spec: as ValidSpec::spec() gives it.
absl::StatusOr<std::vector<db::NewTrial>> ExpandTrials(const v1::SweepSpec& spec,
                                                       const std::vector<WarmupLr>& settings,
                                                       const std::vector<std::vector<AxisValue>>& extra,
                                                       int64_t trial_count);

// The coarse settings of a boundary search: warmup_steps x its initial lrs
// (proto/schema/boundary_search.h).
// The expansion's backstop: no two trials of one resolved config, whatever
// the axes' spellings (the per-axis checks name the field; this catches,
// e.g., two random-search samples that coincide). One per expansion.
class DistinctTrialConfigs {
 public:
  // field: what the error names ("spec" or "spec.random_search").
  explicit DistinctTrialConfigs(std::string field) : field_(std::move(field)) {}
  // resolved: trial `index`'s resolved config; described: its settings as
  // the error says them ("warmup_steps=0, lr=0.001, seed=1").
  absl::Status Add(int32_t index, const v1::TrainConfig& resolved, const std::string& described);

 private:
  const std::string field_;
  std::map<std::string, int32_t> first_;  // resolved config's bytes -> first trial index
};

std::vector<WarmupLr> BoundarySettingsGrid(const v1::SweepSpec& spec);
// Sets boundary_line on trials expanded from BoundarySettingsGrid: a line is
// a (seed, variant, warm-up, placement), numbered in the trials' order.
void AssignBoundaryLines(const v1::SweepSpec& spec, std::vector<db::NewTrial>& trials);

}  // namespace normsweep::scheduler::internal

#endif  // NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_INTERNAL_H_
