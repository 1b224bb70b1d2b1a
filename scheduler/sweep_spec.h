// A submitted SweepSpec parsed once: ValidSpec::Parse checks it (the first
// error wins, INVALID_ARGUMENT naming the field), applies its defaults,
// names each placement by its canonical name and parses the extra axes.
// ExpandSweep (sweep_expander.h) takes only a ValidSpec. Pure functions; no
// I/O.
#ifndef NORMSWEEP_SCHEDULER_SWEEP_SPEC_H_
#define NORMSWEEP_SCHEDULER_SWEEP_SPEC_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "normsweep/v1/sweep.pb.h"
#include "trainer/settings/schemes.h"

namespace normsweep::scheduler {

// One parsed extra-axis value; text is its canonical form ("02" -> "2",
// "0.50" -> "0.5"), used in Trial.variant.
struct AxisValue {
  const google::protobuf::FieldDescriptor* field;
  std::string text;
  int32_t i = 0;
  double d = 0;
};
void Apply(const AxisValue& value, v1::TrainConfig* config);

class ValidSpec {
 public:
  // Runs the steps below in their order (1 to 7); the only way to make one.
  static absl::StatusOr<ValidSpec> Parse(const v1::SweepSpec& spec);

  // The spec as it is stored: max_attempts, max_interruptions and the
  // boundary search's settings with their defaults filled in, and each
  // placement by its canonical name ("sandwich" -> "peri").
  const v1::SweepSpec& spec() const { return spec_; }
  // The extra axes, each value parsed.
  const std::vector<std::vector<AxisValue>>& extra() const { return extra_; }
  // The trials the sweep creates now (a boundary search: its coarse start).
  int64_t trial_count() const { return trial_count_; }

 private:
  ValidSpec() = default;
  v1::SweepSpec spec_;
  std::vector<std::vector<AxisValue>> extra_;
  int64_t trial_count_ = 0;
};

// ---- Parse's steps, in order (exposed for tests) ----

// 1. A field that an axis sets for every trial (placement, lr,
// warmup_steps, seed, and each extra axis's field) is refused in spec.base,
// naming spec.base.FIELD and the axis to use: the axis would overwrite it
// without a word.
absl::Status CheckBaseSetsNoAxis(const v1::SweepSpec& spec);

// 2. The spec's own fields: name, max_attempts, priority, max_concurrent_trials.
absl::Status CheckScalarFields(const v1::SweepSpec& spec);

// 3. The base config: its stored strings, then the trainer's rules on it
// with known-good main-axis values (Probe).
absl::Status CheckBase(const v1::TrainConfig& base);

// base with known-good values for the four main axes, so that a base config
// or a single axis value can be checked on its own.
v1::TrainConfig Probe(const v1::TrainConfig& base);

// 4. Which axes are given and how many values each has; random_search's
// fields when it is set (then warmup_steps and peak_lrs stay empty);
// boundary_search's when it is set (then peak_lrs stays empty and
// random_search unset).
absl::Status CheckAxisSizes(const v1::SweepSpec& spec);

// boundary_search's fields (lr range, resolution, initial_points,
// min_improvement, max_val_loss).
absl::Status CheckBoundarySearch(const v1::BoundarySearch& search);

// 5. Every value of the main axes on its own (applied to probe), and no two
// values of one axis the same setting; the placements' schemes, in order.
absl::StatusOr<std::vector<const trainer::SchemeInfo*>> CheckMainAxisValues(const v1::SweepSpec& spec,
                                                                            const v1::TrainConfig& probe);

// Whether an extra axis may vary this TrainConfig field: scalar model,
// optimisation and data settings; not the four main axes nor the runtime
// fields the worker sets.
bool IsAxisField(const google::protobuf::FieldDescriptor* field);

// text as a value of field (where: the error's field name).
absl::StatusOr<AxisValue> ParseAxisValue(const google::protobuf::FieldDescriptor* field, const std::string& text,
                                         const std::string& where);

// 6. The extra axes: allowed and distinct fields, each value parsed and
// valid on its own (applied to probe), no two the same setting. schemes:
// step 5's (an axis over mix_post_fraction needs every placement Mix-LN).
absl::StatusOr<std::vector<std::vector<AxisValue>>> ParseExtraAxes(
    const v1::SweepSpec& spec, const std::vector<const trainer::SchemeInfo*>& schemes, const v1::TrainConfig& probe);

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

// 7. The number of trials (placements x settings x seeds x extra-axis
// values, settings: warmup_steps x peak_lrs or random_search.samples), or an
// error above kMaxTrialsPerSweep. For a boundary search, the limit applies
// to the most its lines can take (MaxBoundaryTrialsPerLine each), and the
// count is the coarse start's.
absl::StatusOr<int64_t> CheckGridSize(const v1::SweepSpec& spec, const std::vector<std::vector<AxisValue>>& extra);

// The most trials one boundary line can take: the coarse start, then
// bisections of the widest coarse interval until the resolution (the
// bracket is always two neighbouring probes, and each bisection halves its
// log-width).
int64_t MaxBoundaryTrialsPerLine(const v1::BoundarySearch& search);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_SWEEP_SPEC_H_
