// The worker's timing and bookkeeping pieces, with a FakeClock: progress
// batching (ProgressBuffer), the trial watchdog, slot resolution.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/clock.h"
#include "normsweep/v1/worker_service.pb.h"
#include "worker/progress_buffer.h"
#include "worker/slots.h"
#include "worker/trial_watchdog.h"

namespace normsweep::worker {
namespace {

using ::testing::HasSubstr;

v1::TrainEvent Step(int step) {
  v1::TrainEvent e;
  e.set_type("step");
  e.set_step(step);
  e.set_train_loss(5.0 - step * 0.01);
  e.set_lr(1e-3);
  e.set_grad_norm(0.5);
  e.set_tokens_per_s(1000);
  return e;
}

v1::TrainEvent Eval(int step) {
  v1::TrainEvent e;
  e.set_type("eval");
  e.set_step(step);
  e.set_val_loss(4.0);
  e.set_val_accuracy(0.25);
  return e;
}

TEST(ProgressBufferTest, StepAndEvalOfOneStepBecomeOnePoint) {
  FakeClock clock;
  ProgressBuffer b;
  b.Add(Step(1), clock.Now());
  b.Add(Step(2), clock.Now());
  b.Add(Eval(2), clock.Now());
  v1::TrainEvent final_event;
  final_event.set_type("final");
  b.Add(final_event, clock.Now());  // carries no progress
  EXPECT_EQ(b.pending_points(), 2);
  v1::ReportProgressRequest r;
  ASSERT_EQ(b.Peek(100, &r), 2);
  EXPECT_FALSE(r.points(0).has_val_loss());
  EXPECT_EQ(r.points(1).step(), 2);
  EXPECT_DOUBLE_EQ(r.points(1).train_loss(), 4.98);
  EXPECT_DOUBLE_EQ(r.points(1).val_loss(), 4.0);
  EXPECT_DOUBLE_EQ(r.points(1).val_accuracy(), 0.25);
  EXPECT_DOUBLE_EQ(r.points(1).tokens_per_s(), 1000);
}

TEST(ProgressBufferTest, EvalAfterItsStepWentOutIsItsOwnPoint) {
  FakeClock clock;
  ProgressBuffer b;
  b.Add(Step(5), clock.Now());
  v1::ReportProgressRequest r;
  ASSERT_EQ(b.Peek(100, &r), 1);
  b.Add(Eval(5), clock.Now());  // the step's point is in flight: not merged
  b.Ack(1, 0);
  EXPECT_EQ(b.pending_points(), 1);
  v1::ReportProgressRequest r2;
  ASSERT_EQ(b.Peek(100, &r2), 1);
  EXPECT_EQ(r2.points(0).step(), 5);
  EXPECT_FALSE(r2.points(0).has_train_loss());
  EXPECT_TRUE(r2.points(0).has_val_loss());
}

TEST(ProgressBufferTest, FlushesAfterIntervalOrWhenFull) {
  FakeClock clock;
  ProgressBuffer b;
  const absl::Duration interval = absl::Milliseconds(500);
  EXPECT_FALSE(b.ShouldFlush(clock.Now(), interval, 3));
  b.Add(Step(1), clock.Now());
  clock.Advance(absl::Milliseconds(499));
  EXPECT_FALSE(b.ShouldFlush(clock.Now(), interval, 3));
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(b.ShouldFlush(clock.Now(), interval, 3));

  ProgressBuffer full;
  for (int s = 1; s <= 3; ++s) full.Add(Step(s), clock.Now());
  EXPECT_TRUE(full.ShouldFlush(clock.Now(), interval, 3));
}

TEST(ProgressBufferTest, UnacknowledgedBatchIsSentAgainAndAckedOneNever) {
  FakeClock clock;
  ProgressBuffer b;
  v1::TrainEvent g;
  g.set_type("grad_norms");
  g.set_step(0);
  v1::LayerGradNorm* n = g.add_layer_grad_norms();
  n->set_layer(0);
  n->set_matrix("ffn.fc1");
  n->set_norm(2.5);
  b.Add(g, clock.Now());
  for (int s = 1; s <= 5; ++s) b.Add(Step(s), clock.Now());

  v1::ReportProgressRequest first;
  ASSERT_EQ(b.Peek(3, &first), 3);
  ASSERT_EQ(first.layer_grad_norms_size(), 1);
  // The call failed: nothing acknowledged, the same batch goes again.
  v1::ReportProgressRequest again;
  ASSERT_EQ(b.Peek(3, &again), 3);
  EXPECT_EQ(again.SerializeAsString(), first.SerializeAsString());
  b.Ack(3, 1);
  v1::ReportProgressRequest rest;
  ASSERT_EQ(b.Peek(3, &rest), 2);
  EXPECT_EQ(rest.points(0).step(), 4);
  EXPECT_EQ(rest.layer_grad_norms_size(), 0);
  b.Ack(2, 0);
  EXPECT_TRUE(b.empty());
  EXPECT_FALSE(b.ShouldFlush(clock.Now() + absl::Hours(1), absl::Milliseconds(1), 1));
}

TEST(TrialWatchdogTest, TrialTimeoutAndStall) {
  FakeClock clock;
  TrialWatchdog w(clock.Now(), absl::Seconds(60), absl::Seconds(10), absl::Seconds(3));
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(w.Expired(clock.Now()).has_value());
  w.OnEvent(clock.Now());
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(w.Expired(clock.Now()).has_value());
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(w.Expired(clock.Now()).has_value());
  EXPECT_THAT(*w.Expired(clock.Now()), HasSubstr("no progress event for 11 s"));

  TrialWatchdog t(clock.Now(), absl::Seconds(60), absl::Seconds(10), absl::Seconds(3));
  for (int i = 0; i < 60; ++i) {
    clock.Advance(absl::Seconds(1));
    t.OnEvent(clock.Now());
  }
  EXPECT_FALSE(t.Expired(clock.Now()).has_value());
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(t.Expired(clock.Now()).has_value());
  EXPECT_THAT(*t.Expired(clock.Now()), HasSubstr("trial time limit (--trial-timeout-s=60)"));
}

TEST(TrialWatchdogTest, ZeroDisablesLimits) {
  FakeClock clock;
  TrialWatchdog w(clock.Now(), absl::ZeroDuration(), absl::ZeroDuration(), absl::Seconds(3));
  clock.Advance(absl::Hours(100));
  EXPECT_FALSE(w.Expired(clock.Now()).has_value());
}

TEST(TrialWatchdogTest, SigkillFollowsSigtermAfterKillAfter) {
  FakeClock clock;
  TrialWatchdog w(clock.Now(), absl::ZeroDuration(), absl::ZeroDuration(), absl::Seconds(3));
  EXPECT_FALSE(w.ShouldKill(clock.Now()));
  w.OnTerminate(clock.Now());
  EXPECT_TRUE(w.terminating());
  clock.Advance(absl::Seconds(2));
  w.OnTerminate(clock.Now());  // a second SIGTERM does not restart the wait
  EXPECT_FALSE(w.ShouldKill(clock.Now()));
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(w.ShouldKill(clock.Now()));
}

TEST(ResolveSlotsTest, CpuSlotsSplitTheCores) {
  auto s = ResolveSlots("", 3, 0, /*detected_gpus=*/0, /*cores=*/8);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 3u);
  for (const SlotSpec& slot : *s) {
    EXPECT_EQ(slot.device, "cpu");
    EXPECT_EQ(slot.threads, 2);
  }
  auto one = ResolveSlots("", 0, 0, 0, 2);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].threads, 2);
  auto many = ResolveSlots("none", 4, 0, 2, 2);  // more slots than cores: one thread each
  ASSERT_TRUE(many.ok());
  ASSERT_EQ(many->size(), 4u);
  EXPECT_EQ((*many)[3].threads, 1);
  auto fixed = ResolveSlots("", 2, 3, 0, 2);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ((*fixed)[0].threads, 3);
}

TEST(ResolveSlotsTest, OneSlotPerGpu) {
  auto all = ResolveSlots("", 0, 0, 2, 16);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].device, "cuda:0");
  EXPECT_EQ((*all)[1].device, "cuda:1");
  EXPECT_EQ((*all)[1].threads, 8);
  auto listed = ResolveSlots("0,2", 0, 1, 4, 16);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[1].device, "cuda:2");
  EXPECT_EQ((*listed)[1].threads, 1);
  auto none_found = ResolveSlots("all", 0, 0, 0, 4);  // no GPU: one CPU slot
  ASSERT_TRUE(none_found.ok());
  ASSERT_EQ(none_found->size(), 1u);
  EXPECT_EQ((*none_found)[0].device, "cpu");
  auto cpu_only = ResolveSlots("", 2, 0, 4, 8);  // --cpu-slots alone: CPU only
  ASSERT_TRUE(cpu_only.ok());
  EXPECT_EQ(cpu_only->size(), 2u);
  EXPECT_EQ((*cpu_only)[0].device, "cpu");
}

TEST(ResolveSlotsTest, BadValuesNameTheFlag) {
  EXPECT_THAT(std::string(ResolveSlots("0,x", 0, 0, 2, 2).status().message()), HasSubstr("--gpus"));
  EXPECT_THAT(std::string(ResolveSlots("1,1", 0, 0, 2, 2).status().message()), HasSubstr("listed twice"));
  EXPECT_THAT(std::string(ResolveSlots("", -1, 0, 0, 2).status().message()), HasSubstr("--cpu-slots"));
  EXPECT_THAT(std::string(ResolveSlots("", 1, -2, 0, 2).status().message()), HasSubstr("--threads-per-slot"));
}

}  // namespace
}  // namespace normsweep::worker
