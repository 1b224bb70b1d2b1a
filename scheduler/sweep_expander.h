// Turns a SweepSpec into trials: defaults, and the expansion of the grid,
// the random search or a boundary search's coarse start into one resolved
// TrainConfig per trial. Pure functions; no I/O. The spec's checks are
// scheduler/validation.h's (ValidateSweepSpec, which ExpandSweep runs first);
// the pieces of the expansion are in sweep_expander_internal.h.
#ifndef NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_
#define NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "db/store.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::scheduler {

// The spec with defaults applied (max_attempts) and each placement by its
// canonical name ("sandwich" -> "peri"), as it is stored.
v1::SweepSpec NormalizedSpec(const v1::SweepSpec& spec);

// Validates the spec and expands it. Trials are ordered seed-major, then
// extra axes, warm-up, lr, placement (innermost), so that the first trials
// of a sweep already compare both placements on the whole grid.
absl::StatusOr<std::vector<db::NewTrial>> ExpandSweep(const v1::SweepSpec& spec);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_
