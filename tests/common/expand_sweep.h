// A sweep spec parsed and expanded as SubmitSweep does it (scheduler/
// sweep_spec.h, then sweep_expander.h), for tests that need a sweep's
// trials or the message that refuses it. Header-only; link normsweep_scheduler.
#ifndef NORMSWEEP_TESTS_COMMON_EXPAND_SWEEP_H_
#define NORMSWEEP_TESTS_COMMON_EXPAND_SWEEP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/store.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep.pb.h"
#include "scheduler/sweep_expander.h"
#include "scheduler/sweep_spec.h"

namespace normsweep::testing {

// The trials of raw, parsed and expanded.
inline absl::StatusOr<std::vector<db::NewTrial>> Expand(const v1::SweepSpec& raw) {
  absl::StatusOr<scheduler::ValidSpec> valid = scheduler::ValidSpec::Parse(raw);
  if (!valid.ok()) return valid.status();
  return scheduler::ExpandSweep(*valid);
}

// raw as it is stored (ValidSpec::spec); an empty spec after failing the
// test when the parse refuses it.
inline v1::SweepSpec StoredSpec(const v1::SweepSpec& raw) {
  absl::StatusOr<scheduler::ValidSpec> valid = scheduler::ValidSpec::Parse(raw);
  EXPECT_TRUE(valid.ok()) << valid.status();
  return valid.ok() ? valid->spec() : v1::SweepSpec();
}

// The message with which the parse or the expansion refuses spec as
// INVALID_ARGUMENT; "" after failing the test when both accept it.
inline std::string ExpansionError(const v1::SweepSpec& spec) {
  absl::StatusOr<std::vector<db::NewTrial>> trials = Expand(spec);
  EXPECT_FALSE(trials.ok());
  if (trials.ok()) return "";
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(trials.status().message());
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_EXPAND_SWEEP_H_
