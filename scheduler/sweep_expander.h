// Turns a SweepSpec into trials: validation (INVALID_ARGUMENT naming the
// field), defaults, and the expansion of the grid or the random search into
// one resolved TrainConfig per trial. Pure functions; no I/O. The pieces
// ExpandSweep runs are in sweep_expander_internal.h.
#ifndef NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_
#define NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "db/store.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::scheduler {

// Documented limits (see proto/normsweep/v1/sweep.proto).
inline constexpr int kMaxTrials = db::kMaxTrialsPerSweep;  // grid size per sweep
inline constexpr int kMaxAxisValues = 1000;                // values per axis
inline constexpr int kMaxNameLength = 200;
inline constexpr int kMaxRequestIdLength = 128;
inline constexpr int kMaxStringFieldLength = 1024;         // base config strings, axis values
inline constexpr int kMaxPlacementLength = 64;             // placement values
inline constexpr int kDefaultMaxAttempts = 3;
inline constexpr int kMaxMaxAttempts = 100;
inline constexpr int kMaxPriority = 1000;

// The spec with defaults applied (max_attempts), as it is stored.
v1::SweepSpec NormalizedSpec(const v1::SweepSpec& spec);

// Validates the spec and expands it. Trials are ordered seed-major, then
// extra axes, warm-up, lr, placement (innermost), so that the first trials
// of a sweep already compare both placements on the whole grid.
absl::StatusOr<std::vector<db::NewTrial>> ExpandSweep(const v1::SweepSpec& spec);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_
