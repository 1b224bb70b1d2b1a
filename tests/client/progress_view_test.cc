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

v1::Sweep Sweep(int succeeded, int running, int pending) {
  v1::Sweep s;
  s.set_id(3);
  s.set_trial_count(10);
  s.mutable_counts()->set_succeeded(succeeded);
  s.mutable_counts()->set_running(running);
  s.mutable_counts()->set_pending(pending);
  return s;
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

TEST(FormatDurationTest, SecondsMinutesHours) {
  EXPECT_EQ(FormatDuration(-1), "--");
  EXPECT_EQ(FormatDuration(42.4), "42s");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
}

}  // namespace
}  // namespace normsweep::client
