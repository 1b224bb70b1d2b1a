#include "tests/common/leased_sweep.h"

#include <optional>
#include <utility>

#include "common/status_macros.h"

namespace normsweep::testing {

absl::StatusOr<LeasedSweep> CreateLeasedSweep(db::Store& store, const v1::SweepSpec& spec,
                                              const std::vector<db::NewTrial>& trials, const std::string& worker_name,
                                              absl::Time now) {
  LeasedSweep out;
  ASSIGN_OR_RETURN(const db::CreateSweepResult created, store.CreateSweep("", spec, trials, now));
  out.sweep_id = created.sweep.id();
  v1::RegisterWorkerRequest reg;
  reg.set_name(worker_name);
  ASSIGN_OR_RETURN(out.worker, store.RegisterWorker(reg, now));
  while (true) {
    ASSIGN_OR_RETURN(std::optional<v1::Trial> leased, store.LeaseTrial(out.worker, now, absl::Minutes(10)));
    if (!leased.has_value()) break;
    out.trials.push_back(*std::move(leased));
  }
  return out;
}

std::vector<db::NewTrial> PostPreTrials() {
  std::vector<db::NewTrial> trials;
  for (const char* placement : {"post", "pre"}) {
    db::NewTrial t;
    t.index = static_cast<int>(trials.size());
    t.config.set_placement(placement);
    t.config.set_lr(1e-3);
    t.config.set_steps(100);
    trials.push_back(t);
  }
  return trials;
}

}  // namespace normsweep::testing
