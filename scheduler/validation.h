// Every check the scheduler makes on a request or a sweep spec before the
// store sees it. Each error is INVALID_ARGUMENT naming the field
// ("spec.peak_lrs[3]: ...", "points[2].step: must be >= 0"); the first one
// wins. TrainConfig's own rules are the schema library's
// (proto/schema/train_config.h), the API's limits proto/schema/api_limits.h,
// the boundary search's defaults proto/schema/boundary_search.h. Pure
// functions; no I/O.
#ifndef NORMSWEEP_SCHEDULER_VALIDATION_H_
#define NORMSWEEP_SCHEDULER_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"
#include "normsweep/v1/worker_service.pb.h"

namespace normsweep::scheduler {

// "field: what" as INVALID_ARGUMENT.
absl::Status Invalid(const std::string& field, const std::string& what);

// status with its message prefixed by where it came from ("spec.base: lr:
// must be > 0"); OK stays OK.
absl::Status Within(const std::string& where, const absl::Status& status);

// A string that is stored: at most max_length characters and no NUL
// (PostgreSQL's text and jsonb hold none; the statement that stores a group
// of calls would fail for all of them).
absl::Status CheckStoredText(const std::string& field, const std::string& value, size_t max_length);

// ---- requests ----

// An id the client must give: positive.
absl::Status CheckId(const std::string& field, int64_t id);

// A list request's page: its size (the default for 0) and its token's value
// (0 for none).
struct Page {
  int size = 0;
  int64_t token = 0;
};
absl::StatusOr<Page> ValidateListSweeps(const v1::ListSweepsRequest& request);
absl::StatusOr<Page> ValidateListTrials(const v1::ListTrialsRequest& request);

// request_id, and no field of spec.base that an axis sets
// (CheckBaseSetsNoAxis); the rest of the spec is ValidateSweepSpec's.
absl::Status ValidateSubmitSweep(const v1::SubmitSweepRequest& request);

// A field that an axis sets for every trial (placement, lr, warmup_steps,
// seed, and each extra axis's field) is refused in spec.base, naming
// spec.base.FIELD and the axis to use: the axis would overwrite it without a
// word. Submissions only: a sweep already stored is read as it is.
absl::Status CheckBaseSetsNoAxis(const v1::SweepSpec& spec);

// The near-best tolerance to use (the request's, or the default for 0).
absl::StatusOr<double> ValidateGetSweepAnalysis(const v1::GetSweepAnalysisRequest& request);

absl::Status ValidateRegisterWorker(const v1::RegisterWorkerRequest& request);
// worker_id, and max_trials in [0, kMaxFusedTrials].
absl::Status ValidateLeaseTrial(const v1::LeaseTrialRequest& request);
absl::Status ValidateHeartbeat(const v1::HeartbeatRequest& request);
// The number of layer gradient norms in the request.
absl::StatusOr<int> ValidateProgress(const v1::ReportProgressRequest& request);
absl::Status ValidateFinish(const v1::FinishTrialRequest& request);

// ---- the sweep spec ----

// One parsed extra-axis value; text is its canonical form ("02" -> "2",
// "0.50" -> "0.5"), used in Trial.variant.
struct AxisValue {
  const google::protobuf::FieldDescriptor* field;
  std::string text;
  int32_t i = 0;
  double d = 0;
};
void Apply(const AxisValue& value, v1::TrainConfig* config);

// What the expansion of a valid spec needs: its extra axes parsed, and the
// number of trials it creates now (for a boundary search, the coarse start).
struct ValidSpec {
  std::vector<std::vector<AxisValue>> extra;
  int64_t trial_count = 0;
};
// Runs the checks below in their order (1 to 6).
absl::StatusOr<ValidSpec> ValidateSweepSpec(const v1::SweepSpec& spec);

// 1. The spec's own fields: name, max_attempts, priority, max_concurrent_trials.
absl::Status CheckScalarFields(const v1::SweepSpec& spec);

// 2. The base config: its stored strings, then the trainer's rules on it
// with known-good main-axis values (Probe).
absl::Status CheckBase(const v1::TrainConfig& base);

// base with known-good values for the four main axes, so that a base config
// or a single axis value can be checked on its own.
v1::TrainConfig Probe(const v1::TrainConfig& base);

// 3. Which axes are given and how many values each has; random_search's
// fields when it is set (then warmup_steps and peak_lrs stay empty);
// boundary_search's when it is set (then peak_lrs stays empty and
// random_search unset).
absl::Status CheckAxisSizes(const v1::SweepSpec& spec);

// boundary_search's fields (lr range, resolution, initial_points,
// min_improvement, max_val_loss).
absl::Status CheckBoundarySearch(const v1::BoundarySearch& search);

// 4. Every value of the main axes on its own (applied to probe), and no two
// values of one axis the same setting.
absl::Status CheckMainAxisValues(const v1::SweepSpec& spec, const v1::TrainConfig& probe);

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
// error above kMaxTrialsPerSweep. For a boundary search, the limit applies
// to the most its lines can take (MaxBoundaryTrialsPerLine each), and the
// count is the coarse start's.
absl::StatusOr<int64_t> CheckGridSize(const v1::SweepSpec& spec, const std::vector<std::vector<AxisValue>>& extra);

// The most trials one boundary line can take: the coarse start, then
// bisections of the widest coarse interval until the resolution (the
// bracket is always two neighbouring probes, and each bisection halves its
// log-width).
int64_t MaxBoundaryTrialsPerLine(const v1::BoundarySearch& search);

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

// The shortest decimal text that reads back as d ("0.5", not "0.50000000000000000").
std::string ShortestDouble(double d);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_VALIDATION_H_
