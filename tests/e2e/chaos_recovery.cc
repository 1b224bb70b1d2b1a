#include "tests/e2e/chaos_recovery.h"

#include <set>

namespace normsweep::chaos {
namespace {

// How far a trial got from `before` (a poll before the fault) to `after`.
struct Movement {
  bool ended = false;       // final
  bool requeued = false;    // PENDING again, or a later attempt
  bool leased = false;      // a later attempt
  bool progressed = false;  // steps stored: in a later attempt, or (unless `hit`) in the same one
};

Movement Moved(const TrialView& before, const TrialView& after, bool hit) {
  Movement m;
  m.ended = IsFinal(after.state) && !IsFinal(before.state);
  m.leased = after.attempts > before.attempts;
  m.requeued = m.leased || (before.state == v1::TRIAL_RUNNING && after.state == v1::TRIAL_PENDING);
  m.progressed = (m.leased && after.last_step > 0) ||
                 (!hit && !m.leased && after.state == v1::TRIAL_RUNNING && after.last_step > before.last_step);
  return m;
}

}  // namespace

const char* FaultName(FaultKind k) {
  switch (k) {
    case FaultKind::kTrainer: return "trainer SIGKILL";
    case FaultKind::kWorker: return "worker SIGKILL";
    case FaultKind::kScheduler: return "scheduler SIGKILL";
    case FaultKind::kPostgresCrash: return "PostgreSQL crash";
    case FaultKind::kPostgresFast: return "PostgreSQL restart";
  }
  return "?";
}

bool IsFinal(v1::TrialState s) {
  return s == v1::TRIAL_SUCCEEDED || s == v1::TRIAL_DIVERGED || s == v1::TRIAL_FAILED || s == v1::TRIAL_CANCELLED;
}

Recovery Measure(const std::vector<Poll>& polls, const Fault& f) {
  Recovery r;
  const Poll* base = nullptr;
  for (const Poll& p : polls) {
    if (p.at < f.at) base = &p;
  }
  if (base == nullptr) return r;
  std::set<int64_t> unmoved, unprogressed;
  for (const auto& [id, t] : base->trials) {
    if (t.state != v1::TRIAL_RUNNING || t.last_step == 0) continue;
    unmoved.insert(id);
    unprogressed.insert(id);
  }
  for (const Poll& p : polls) {
    if (p.at < f.done) continue;
    const absl::Duration since = p.at - f.at;
    for (const auto& [id, after] : p.trials) {
      auto before = base->trials.find(id);
      if (before == base->trials.end()) continue;
      const bool hit = id == f.trial_id;
      const Movement m = Moved(before->second, after, hit);
      if (m.ended || m.requeued || m.progressed) unmoved.erase(id);
      if (m.ended || m.progressed) unprogressed.erase(id);
      if (!r.next_lease && m.leased) r.next_lease = since;
      if (!r.next_progress && !hit && (m.progressed || (m.ended && after.state == v1::TRIAL_SUCCEEDED))) {
        r.next_progress = since;
      }
      if (hit && !r.hit_requeued && m.requeued) r.hit_requeued = since;
      if (hit && !r.hit_progressing && m.progressed) r.hit_progressing = since;
      if (hit && !r.hit_ended && !r.hit_requeued && m.ended) r.hit_ended = after.state;
    }
    if (!r.recovered && unmoved.empty()) r.recovered = since;
    if (!r.all_progressing && unprogressed.empty()) r.all_progressing = since;
  }
  return r;
}

}  // namespace normsweep::chaos
