// The state names the store writes to PostgreSQL and the metrics and CLI
// show: every enum value, both ways. A renamed or added state in sweep.proto
// shows up here.
#include "proto/schema/state_names.h"

#include "gtest/gtest.h"

namespace normsweep::schema {
namespace {

TEST(StateNamesTest, TrialStatesBothWays) {
  const std::pair<v1::TrialState, const char*> kNames[] = {
      {v1::TRIAL_PENDING, "PENDING"},     {v1::TRIAL_RUNNING, "RUNNING"}, {v1::TRIAL_SUCCEEDED, "SUCCEEDED"},
      {v1::TRIAL_DIVERGED, "DIVERGED"},   {v1::TRIAL_FAILED, "FAILED"},   {v1::TRIAL_CANCELLED, "CANCELLED"},
  };
  for (const auto& [state, name] : kNames) {
    EXPECT_EQ(TrialStateName(state), name);
    EXPECT_EQ(TrialStateFromName(name), state) << name;
  }
  EXPECT_EQ(TrialStateName(v1::TRIAL_STATE_UNSPECIFIED), "UNSPECIFIED");
  EXPECT_EQ(TrialStateName(static_cast<v1::TrialState>(99)), "UNSPECIFIED");
  for (const char* other : {"", "UNSPECIFIED", "succeeded", "TRIAL_SUCCEEDED", " FAILED", "DONE"}) {
    EXPECT_EQ(TrialStateFromName(other), v1::TRIAL_STATE_UNSPECIFIED) << other;
  }
}

TEST(StateNamesTest, SweepStatesBothWays) {
  const std::pair<v1::SweepState, const char*> kNames[] = {
      {v1::SWEEP_RUNNING, "RUNNING"}, {v1::SWEEP_COMPLETED, "COMPLETED"}, {v1::SWEEP_CANCELLED, "CANCELLED"}};
  for (const auto& [state, name] : kNames) {
    EXPECT_EQ(SweepStateName(state), name);
    EXPECT_EQ(SweepStateFromName(name), state) << name;
  }
  EXPECT_EQ(SweepStateName(v1::SWEEP_STATE_UNSPECIFIED), "UNSPECIFIED");
  EXPECT_EQ(SweepStateFromName("PENDING"), v1::SWEEP_STATE_UNSPECIFIED);
  EXPECT_EQ(SweepStateFromName("running"), v1::SWEEP_STATE_UNSPECIFIED);
}

TEST(StateNamesTest, FinalStates) {
  for (int s = v1::TrialState_MIN; s <= v1::TrialState_MAX; ++s) {
    const auto state = static_cast<v1::TrialState>(s);
    const bool expected = state == v1::TRIAL_SUCCEEDED || state == v1::TRIAL_DIVERGED ||
                          state == v1::TRIAL_FAILED || state == v1::TRIAL_CANCELLED;
    EXPECT_EQ(IsFinal(state), expected) << TrialStateName(state);
  }
}

}  // namespace
}  // namespace normsweep::schema
