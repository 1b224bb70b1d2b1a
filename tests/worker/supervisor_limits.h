// The limits the supervisors' unit tests (TrialSupervisor, GroupSupervisor)
// run under, with a FakeClock. Header-only.
#ifndef NORMSWEEP_TESTS_WORKER_SUPERVISOR_LIMITS_H_
#define NORMSWEEP_TESTS_WORKER_SUPERVISOR_LIMITS_H_

#include "absl/time/time.h"
#include "worker/trial_supervisor.h"

namespace normsweep::testing {

// A 60 s time limit, 10 s without an event, SIGKILL 3 s after SIGTERM,
// the next lease when 3 s are left.
inline worker::SupervisorLimits TestLimits() {
  worker::SupervisorLimits l;
  l.trial_timeout = absl::Seconds(60);
  l.stall_timeout = absl::Seconds(10);
  l.kill_after = absl::Seconds(3);
  l.prefetch_lead = absl::Seconds(3);
  return l;
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_WORKER_SUPERVISOR_LIMITS_H_
