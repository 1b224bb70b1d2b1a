#include "client/attempts_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;

TEST(AttemptsTable, OneLinePerAttemptWithWhatItLeftAndWhy) {
  google::protobuf::RepeatedPtrField<v1::TrialAttempt> attempts;
  EXPECT_EQ(RenderAttemptsTable(attempts), "");
  v1::TrialAttempt* a = attempts.Add();
  a->set_attempt(1);
  a->set_worker_id(3);
  a->mutable_ended_at()->set_seconds(1796112649);  // 2026-12-01T08:10:49Z
  a->mutable_ended_at()->set_nanos(500000000);
  a->set_outcome(v1::TRIAL_PENDING);
  a->set_reason("normsweep-train killed by signal 9 (Killed) without a final event");
  a->set_interruption("external_signal");
  v1::TrialAttempt* c = attempts.Add();
  c->set_attempt(2);
  c->set_worker_id(4);
  c->set_outcome(v1::TRIAL_PENDING);
  c->set_reason("normsweep-train killed by signal 11 (Segmentation fault) without a final event");
  v1::TrialAttempt* b = attempts.Add();
  b->set_attempt(3);
  b->set_outcome(v1::TRIAL_SUCCEEDED);
  const std::string table = RenderAttemptsTable(attempts);
  EXPECT_THAT(table, HasSubstr("attempt  worker  ended                 then       counted as        reason\n"));
  EXPECT_THAT(table, HasSubstr("1        3       2026-12-01T08:10:49Z  re-queued  external_signal   "
                               "normsweep-train killed by signal 9"));
  EXPECT_THAT(table, HasSubstr("2        4       -                     re-queued  own failure       "
                               "normsweep-train killed by signal 11"));
  EXPECT_THAT(table, HasSubstr("3        -       -                     succeeded  -                 -\n"));
}

}  // namespace
}  // namespace normsweep::client
