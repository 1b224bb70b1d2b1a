// Turns a SweepSpec into trials: validation (INVALID_ARGUMENT naming the
// field), defaults, and the expansion of the grid or the random search into
// one resolved TrainConfig per trial. Pure functions; no I/O. The limits are
// the API's (proto/schema/api_limits.h); the pieces ExpandSweep runs are in
// sweep_expander_internal.h.
#ifndef NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_
#define NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "db/store.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::scheduler {

// The spec with defaults applied (max_attempts), as it is stored.
v1::SweepSpec NormalizedSpec(const v1::SweepSpec& spec);

// Validates the spec and expands it. Trials are ordered seed-major, then
// extra axes, warm-up, lr, placement (innermost), so that the first trials
// of a sweep already compare both placements on the whole grid.
absl::StatusOr<std::vector<db::NewTrial>> ExpandSweep(const v1::SweepSpec& spec);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_
