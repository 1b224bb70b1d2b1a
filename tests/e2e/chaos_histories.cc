#include "tests/e2e/chaos_histories.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/schema/interruptions.h"

namespace normsweep::chaos {
namespace {

std::string Describe(int64_t trial, const v1::TrialAttempt& a) {
  return absl::StrCat("trial ", trial, " attempt ", a.attempt(), " (worker ", a.worker_id(), "): ",
                      v1::TrialState_Name(a.outcome()), ", cause '", a.interruption(), "', ", a.reason());
}

}  // namespace

std::string CauseOf(const Histories& histories, int64_t trial, int attempt) {
  auto h = histories.find(trial);
  if (h == histories.end()) return "no history";
  for (const v1::TrialAttempt& a : h->second.attempts()) {
    if (a.attempt() != attempt) continue;
    if (!a.interruption().empty()) return a.interruption();
    return absl::StrCat("own failure (", v1::TrialState_Name(a.outcome()), ")");
  }
  return "no entry";
}

AttemptSummary SummarizeAttempts(const Histories& histories) {
  AttemptSummary s;
  for (const auto& [id, h] : histories) {
    s.counted += h.trial().interruptions();
    if (h.trial().interruptions() > s.most) {
      s.most = h.trial().interruptions();
      s.most_trial = id;
    }
    for (const v1::TrialAttempt& a : h.attempts()) {
      ++s.attempts;
      if (a.interruption().empty()) {
        if (a.outcome() != v1::TRIAL_SUCCEEDED) s.own_failures.push_back(Describe(id, a));
        continue;
      }
      ++s.interrupted;
      ++s.by_cause[a.interruption()];
      if (!schema::IsInterruptionCause(a.interruption())) s.unknown_causes.push_back(Describe(id, a));
    }
  }
  return s;
}

void ExpectHistory(const v1::Trial& t, const v1::GetTrialResponse& h) {
  std::vector<int> numbers, want;
  int with_cause = 0;
  for (const v1::TrialAttempt& a : h.attempts()) {
    numbers.push_back(a.attempt());
    with_cause += !a.interruption().empty();
    const bool last = a.attempt() == t.attempts();
    EXPECT_EQ(a.outcome(), last ? t.state() : v1::TRIAL_PENDING) << Describe(t.id(), a);
  }
  for (int i = 1; i <= t.attempts(); ++i) want.push_back(i);
  EXPECT_EQ(numbers, want) << "trial " << t.id() << ": not one history entry per lease";
  EXPECT_EQ(h.trial().interruptions(), with_cause) << "trial " << t.id();
  EXPECT_EQ(t.interruptions(), with_cause) << "trial " << t.id() << " (ListTrials)";
}

}  // namespace normsweep::chaos
