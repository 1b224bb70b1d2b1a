// Turns a parsed sweep spec (sweep_spec.h) into trials: the grid, the random
// search or a boundary search's coarse start, one resolved TrainConfig per
// trial. Pure functions; no I/O; no checks of the spec (ValidSpec::Parse made
// them). The pieces are in sweep_expander_internal.h.
#ifndef NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_
#define NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "db/store.h"
#include "scheduler/sweep_spec.h"

namespace normsweep::scheduler {

// The trials of spec, ordered seed-major, then extra axes, warm-up, lr,
// placement (innermost), so that the first trials of a sweep already
// compare both placements on the whole grid. An error only for a config the
// trainer refuses after all or two trials of one resolved config (two
// random-search samples that coincide).
absl::StatusOr<std::vector<db::NewTrial>> ExpandSweep(const ValidSpec& spec);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_SWEEP_EXPANDER_H_
