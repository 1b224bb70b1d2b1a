// The expander tests' check of a rejected spec. Header-only.
#ifndef NORMSWEEP_TESTS_SCHEDULER_EXPANSION_ERROR_H_
#define NORMSWEEP_TESTS_SCHEDULER_EXPANSION_ERROR_H_

#include <string>

#include "gtest/gtest.h"
#include "normsweep/v1/sweep.pb.h"
#include "scheduler/sweep_expander.h"

namespace normsweep::testing {

// The message with which ExpandSweep rejects spec as INVALID_ARGUMENT; ""
// after failing the test when it accepts it.
inline std::string ExpansionError(const v1::SweepSpec& spec) {
  auto trials = scheduler::ExpandSweep(spec);
  EXPECT_FALSE(trials.ok());
  if (trials.ok()) return "";
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(trials.status().message());
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_SCHEDULER_EXPANSION_ERROR_H_
