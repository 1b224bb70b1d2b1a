// The pieces of ExpandSweep (sweep_expander.h), exposed for tests. ExpandSweep
// runs the checks in the order below and returns the first error; each is
// INVALID_ARGUMENT naming the field ("spec.peak_lrs[3]: ...").
#ifndef NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_INTERNAL_H_
#define NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_INTERNAL_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "db/store.h"
#include "google/protobuf/descriptor.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::scheduler::internal {

// 1. The spec's own fields: name, max_attempts, priority, max_concurrent_trials.
absl::Status CheckScalarFields(const v1::SweepSpec& spec);

// 2. The base config: its stored strings, then the trainer's rules on it
// with known-good main-axis values (Probe).
absl::Status CheckBase(const v1::TrainConfig& base);

// base with known-good values for the four main axes, so that a base config
// or a single axis value can be checked on its own.
v1::TrainConfig Probe(const v1::TrainConfig& base);

// 3. Which axes are given and how many values each has; random_search's
// fields when it is set (then warmup_steps and peak_lrs stay empty).
absl::Status CheckAxisSizes(const v1::SweepSpec& spec);

// 4. Every value of the main axes on its own (applied to probe), and no two
// values of one axis the same setting.
absl::Status CheckMainAxisValues(const v1::SweepSpec& spec, const v1::TrainConfig& probe);

// One parsed extra-axis value; text is its canonical form ("02" -> "2",
// "0.50" -> "0.5"), used in Trial.variant.
struct AxisValue {
  const google::protobuf::FieldDescriptor* field;
  std::string text;
  int32_t i = 0;
  double d = 0;
};
void Apply(const AxisValue& value, v1::TrainConfig* config);

// Whether an extra axis may vary this TrainConfig field: scalar model,
// optimisation and data settings; not the four main axes nor the runtime
// fields the worker sets.
bool IsAxisField(const google::protobuf::FieldDescriptor* field);

// text as a value of field (where: the error's field name).
absl::StatusOr<AxisValue> ParseAxisValue(const google::protobuf::FieldDescriptor* field, const std::string& text,
                                         const std::string& where);

// 5. The extra axes: allowed and distinct fields, each value parsed and
// valid on its own (applied to probe), no two the same setting.
absl::StatusOr<std::vector<std::vector<AxisValue>>> ParseExtraAxes(const v1::SweepSpec& spec,
                                                                   const v1::TrainConfig& probe);

// The values seen on one axis, keyed by the config they resolve to: two
// values are the same setting when they resolve to the same trainer config
// ("post" and "post-ln", "2" and "02"), which would put two trials of one
// config in the sweep.
class AxisValues {
 public:
  explicit AxisValues(std::string axis) : axis_(std::move(axis)) {}
  // config: probe with the value at `index` applied (also validated);
  // shown: the value as the error quotes it.
  absl::Status Add(int index, const std::string& shown, const v1::TrainConfig& config);

 private:
  const std::string axis_;
  std::map<std::string, int> first_;  // resolved config's bytes -> first index
};

// 6. The number of trials (placements x settings x seeds x extra-axis
// values, settings: warmup_steps x peak_lrs or random_search.samples), or an
// error above kMaxTrialsPerSweep.
absl::StatusOr<int64_t> CheckGridSize(const v1::SweepSpec& spec, const std::vector<std::vector<AxisValue>>& extra);

// 7. The (warm-up, lr) settings: the warmup_steps x peak_lrs grid (warm-up
// outer), or random_search's samples (lr log-uniform, warm-up uniform;
// deterministic for a given seed on every platform).
using WarmupLr = std::pair<int32_t, double>;
std::vector<WarmupLr> GridSettings(const v1::SweepSpec& spec);
std::vector<WarmupLr> SampleRandomSearch(const v1::RandomSearch& random_search);

// 8. One trial per seed x extra-axis variant x setting x placement, in that
// order (placement innermost), each config resolved; an error for a config
// the trainer refuses or two trials of one resolved config.
absl::StatusOr<std::vector<db::NewTrial>> ExpandTrials(const v1::SweepSpec& spec,
                                                       const std::vector<WarmupLr>& settings,
                                                       const std::vector<std::vector<AxisValue>>& extra,
                                                       int64_t trial_count);

// boundary_search (db/boundary_search.h): its fields (lr range, resolution,
// initial_points, min_improvement, max_val_loss), checked by CheckAxisSizes
// when it is set (then peak_lrs stays empty and random_search unset).
absl::Status CheckBoundarySearch(const v1::BoundarySearch& search);
// The most trials one line can take: the coarse start, then bisections of
// the widest coarse interval until the resolution (the bracket is always two
// neighbouring probes, and each bisection halves its log-width).
int64_t MaxBoundaryTrialsPerLine(const v1::BoundarySearch& search);
// The coarse settings of a boundary search: warmup_steps x its initial lrs.
std::vector<WarmupLr> BoundarySettingsGrid(const v1::SweepSpec& spec);
// Sets boundary_line on trials expanded from BoundarySettingsGrid: a line is
// a (seed, variant, warm-up, placement), numbered in the trials' order.
void AssignBoundaryLines(const v1::SweepSpec& spec, std::vector<db::NewTrial>& trials);

// The shortest decimal text that reads back as d ("0.5", not "0.50000000000000000").
std::string ShortestDouble(double d);

}  // namespace normsweep::scheduler::internal

#endif  // NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_INTERNAL_H_
