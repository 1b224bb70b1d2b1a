// ProgressView, the line of `normsweep watch`: redrawn at every update on a
// terminal; elsewhere a line when a trial ends or every 30 s. Time from a
// FakeClock, text into a vector: no sleeps, no stdout.
#include "client/progress_view.h"

#include <string>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// An event of a sweep of 10 trials without the trials that changed.
v1::WatchSweepEvent Sweep(int succeeded, int running, int pending, int cancelled = 0) {
  v1::WatchSweepEvent e;
  v1::Sweep* s = e.mutable_sweep();
  s->set_id(3);
  s->set_trial_count(10);
  s->mutable_counts()->set_succeeded(succeeded);
  s->mutable_counts()->set_running(running);
  s->mutable_counts()->set_pending(pending);
  s->mutable_counts()->set_cancelled(cancelled);
  return e;
}

// A trial of the event, RUNNING; training from the given step on (-1:
// leased, no progress yet).
void AddRunning(v1::WatchSweepEvent& e, int64_t id, int step) {
  v1::Trial* t = e.add_trials();
  t->set_id(id);
  t->set_state(v1::TRIAL_RUNNING);
  if (step >= 0) {
    t->set_last_step(step);
    t->set_last_val_loss(5.5);  // the step-0 evaluation
  }
}

struct Recorder {
  std::vector<std::string> written;
  std::function<void(const std::string&)> Writer() {
    return [this](const std::string& text) { written.push_back(text); };
  }
};

TEST(ProgressViewTest, OnATerminalRedrawsTheLineAtEveryUpdate) {
  FakeClock clock;
  Recorder out;
  ProgressView view(/*live=*/true, clock, out.Writer());
  view.Update(Sweep(0, 2, 8));
  view.Update(Sweep(0, 2, 8));  // nothing changed: drawn again all the same
  clock.Advance(absl::Seconds(1));
  view.Update(Sweep(0, 3, 7));
  view.Finish();
  ASSERT_EQ(out.written.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_THAT(out.written[i], StartsWith("\r\033[Ksweep 3 ["));
  EXPECT_THAT(out.written[2], HasSubstr("0/10 done | 3 running | 7 pending"));
  EXPECT_EQ(out.written[3], "\n");
}

TEST(ProgressViewTest, ElsewhereALineWhenATrialEnds) {
  FakeClock clock;
  Recorder out;
  ProgressView view(/*live=*/false, clock, out.Writer());
  view.Update(Sweep(0, 2, 8));  // the first update: a line
  for (int i = 0; i < 20; ++i) {  // polls within 30 s without a trial ending: none
    clock.Advance(absl::Seconds(1));
    view.Update(Sweep(0, 2 + i % 2, 8 - i % 2));
  }
  clock.Advance(absl::Seconds(1));
  view.Update(Sweep(1, 2, 7));  // a trial ended: a line at once
  view.Update(Sweep(1, 3, 6));
  view.Finish();
  ASSERT_EQ(out.written.size(), 2u);
  EXPECT_EQ(out.written[0],
            "sweep 3 [..............................] 0/10 done | 2 running | 8 pending | 0 diverged | 0 failed | "
            "ETA --\n");
  // One trial in 21 s, nine to go: ETA 9 x 21 s.
  EXPECT_EQ(out.written[1],
            "sweep 3 [###...........................] 1/10 done | 2 running | 7 pending | 0 diverged | 0 failed | "
            "ETA 3m09s\n");
}

TEST(ProgressViewTest, ElsewhereALineEvery30sWithoutATrialEnding) {
  FakeClock clock;
  Recorder out;
  ProgressView view(/*live=*/false, clock, out.Writer());
  view.Update(Sweep(0, 2, 8));
  clock.Advance(absl::Seconds(29));
  view.Update(Sweep(0, 2, 8));
  clock.Advance(absl::Seconds(1));
  view.Update(Sweep(0, 2, 8));  // 30 s since the last line
  clock.Advance(absl::Seconds(10));
  view.Update(Sweep(0, 2, 8));
  clock.Advance(absl::Seconds(10));
  view.Update(Sweep(2, 2, 6));  // a trial ended: a line, and the 30 s count again from here
  clock.Advance(absl::Seconds(29));
  view.Update(Sweep(2, 2, 6));
  clock.Advance(absl::Seconds(1));
  view.Update(Sweep(2, 2, 6));
  view.Finish();  // no trailing newline off a terminal
  ASSERT_EQ(out.written.size(), 4u);
  EXPECT_THAT(out.written, ElementsAre(HasSubstr(" 0/10 done"), HasSubstr(" 0/10 done"), HasSubstr(" 2/10 done"),
                                       HasSubstr(" 2/10 done")));
  for (const std::string& line : out.written) EXPECT_THAT(line, ::testing::Not(HasSubstr("\r")));
}

TEST(ProgressViewTest, ElsewhereTheLastTrialEndingIsPrinted) {
  FakeClock clock;
  Recorder out;
  ProgressView view(/*live=*/false, clock, out.Writer());
  view.Update(Sweep(9, 1, 0));
  clock.Advance(absl::Seconds(2));
  view.Update(Sweep(10, 0, 0));
  ASSERT_EQ(out.written.size(), 2u);
  EXPECT_THAT(out.written[1], HasSubstr("[##############################] 10/10 done | 0 running | 0 pending"));
  EXPECT_THAT(out.written[1], HasSubstr("| ETA 0s\n"));
}

// A trial leased before its slot is free (a worker's prefetch), or whose
// trainer has not reported yet, is not running: it is counted apart until
// its first progress.
TEST(ProgressViewTest, RunningCountsOnlyTrialsThatAreTraining) {
  FakeClock clock;
  Recorder out;
  ProgressView view(/*live=*/true, clock, out.Writer());
  v1::WatchSweepEvent first = Sweep(0, 3, 7);  // a stream's first event: every trial
  AddRunning(first, 11, 40);
  AddRunning(first, 12, 0);   // the step-0 evaluation reported: training
  AddRunning(first, 13, -1);  // leased only
  first.add_trials()->set_id(14);  // pending
  first.mutable_trials(3)->set_state(v1::TRIAL_PENDING);
  view.Update(first);
  EXPECT_THAT(out.written.back(), HasSubstr("0/10 done | 2 running | 1 leased, not started | 7 pending |"));
  v1::WatchSweepEvent next = Sweep(0, 3, 7);  // later events: only the trials that changed
  view.Update(next);
  EXPECT_THAT(out.written.back(), HasSubstr("| 2 running | 1 leased, not started |"));
  AddRunning(next, 13, 1);  // its trainer started
  view.Update(next);
  EXPECT_THAT(out.written.back(), HasSubstr("0/10 done | 3 running | 7 pending |"));
  // Trial 12 ended and 14 was leased: 12 leaves, 14 waits.
  v1::WatchSweepEvent later = Sweep(1, 3, 6);
  later.add_trials()->set_id(12);
  later.mutable_trials(0)->set_state(v1::TRIAL_SUCCEEDED);
  AddRunning(later, 14, -1);
  view.Update(later);
  EXPECT_THAT(out.written.back(), HasSubstr("1/10 done | 2 running | 1 leased, not started | 6 pending |"));
  EXPECT_FALSE(IsTraining(later.trials(0)));  // ended: not training
  EXPECT_FALSE(IsTraining(later.trials(1)));
  EXPECT_TRUE(IsTraining(first.trials(1)));
}

// Cancelled trials end the sweep but are not done: the bar counts them, the
// done count does not.
TEST(ProgressViewTest, CancelledTrialsAreNotDone) {
  FakeClock clock;
  Recorder out;
  ProgressView view(/*live=*/false, clock, out.Writer());
  view.Update(Sweep(4, 0, 0, /*cancelled=*/6));
  ASSERT_EQ(out.written.size(), 1u);
  EXPECT_EQ(out.written[0],
            "sweep 3 [##############################] 4/10 done | 0 running | 0 pending | 0 diverged | 0 failed | "
            "6 cancelled | ETA 0s\n");
}

TEST(ProgressViewTest, InterruptedWatchSaysTheSweepGoesOn) {
  EXPECT_EQ(InterruptedWatchMessage(42),
            "\nnormsweep: stopped watching; sweep 42 goes on (the scheduler runs it whether or not it is watched)\n"
            "  follow it again: normsweep watch 42\n"
            "  stop it:         normsweep cancel 42\n");
}

TEST(FormatDurationTest, SecondsMinutesHours) {
  EXPECT_EQ(FormatDuration(-1), "--");
  EXPECT_EQ(FormatDuration(42.4), "42s");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
  EXPECT_EQ(FormatDuration(1e10), "2777777h46m");  // no overflow
  EXPECT_EQ(Grouped(1234567), "1,234,567");
  EXPECT_EQ(Grouped(-1000), "-1,000");
  EXPECT_EQ(Grouped(999), "999");
}

}  // namespace
}  // namespace normsweep::client
