// What chaos_test's trials' histories (GetTrial) must say after the faults:
// every ended attempt's interruption cause, and one history entry per lease.
#ifndef NORMSWEEP_TESTS_E2E_CHAOS_HISTORIES_H_
#define NORMSWEEP_TESTS_E2E_CHAOS_HISTORIES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::chaos {

using Histories = std::map<int64_t, v1::GetTrialResponse>;  // by trial id

// The recorded interruption cause of `trial`'s attempt `attempt`, "own
// failure (STATE)" when it has none, or "no entry".
std::string CauseOf(const Histories& histories, int64_t trial, int attempt);

// The histories' attempts, counted.
struct AttemptSummary {
  int attempts = 0;                        // entries in the histories
  int interrupted = 0;                     // of them, with a cause
  std::map<std::string, int> by_cause;
  int counted = 0;                         // the sum of Trial.interruptions
  int most = 0;                            // the most interruptions of one trial
  int64_t most_trial = 0;
  std::vector<std::string> own_failures;   // ended without a cause, yet not SUCCEEDED
  std::vector<std::string> unknown_causes; // a cause not in schema::kInterruptionCauses
};

AttemptSummary SummarizeAttempts(const Histories& histories);

// One entry per lease, numbered 1..attempts, each but the last re-queued
// the trial and the last is its outcome; Trial.interruptions counts those
// with a cause.
void ExpectHistory(const v1::Trial& t, const v1::GetTrialResponse& h);

}  // namespace normsweep::chaos

#endif  // NORMSWEEP_TESTS_E2E_CHAOS_HISTORIES_H_
