// GroupSupervisor with a FakeClock and no process: events routed to their
// member, a member stopped alone by `cancel I` or the process by one
// SIGTERM, SIGKILL after the trainer's lock step, a lingering fused process,
// fused members concluded at their final event, one prefetch per group.
#include "worker/group_supervisor.h"

#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/schema/train_config.h"
#include "tests/worker/supervisor_limits.h"

namespace normsweep::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::TestLimits;

constexpr int kPid = 4242;

// A trainer's stdout line: an event of fused trial `member`.
std::string Line(int member, const std::string& type, int step, const std::string& outcome = "") {
  v1::TrainEvent e;
  e.set_type(type);
  e.set_step(step);
  e.set_fused_index(member);
  if (type == "eval") e.set_val_loss(4.0);
  if (!outcome.empty()) e.set_outcome(outcome);
  return schema::TrainEventToJson(e);
}

LeaseFlags Cancelled() {
  LeaseFlags f;
  f.cancel_requested = true;
  return f;
}

// The log lines of an action, each as "member: text".
std::vector<std::string> Logs(const GroupAction& a) {
  std::vector<std::string> out;
  for (const GroupLog& l : a.log) out.push_back(absl::StrCat(l.member, ": ", l.text));
  return out;
}

class GroupSupervisorTest : public ::testing::Test {
 protected:
  GroupSupervisor Make(int size, int steps = 100) {
    return GroupSupervisor(size, clock_.Now(), steps, TestLimits(), kPid);
  }
  // Advances the clock by dt, then feeds `lines` and polls.
  GroupAction At(GroupSupervisor& s, absl::Duration dt, const std::vector<std::string>& lines = {},
                 std::vector<LeaseFlags> flags = {}, bool exited = false) {
    clock_.Advance(dt);
    for (const std::string& line : lines) s.OnLine(line, clock_.Now());
    flags.resize(s.size());
    return s.OnPoll(clock_.Now(), exited, flags);
  }

  FakeClock clock_;
};

TEST_F(GroupSupervisorTest, EventsGoToTheirMemberWhichKeepsItsStepL0AndFinalEvent) {
  GroupSupervisor s = Make(3);
  const absl::Time now = clock_.Now();
  RoutedLine r = s.OnLine(Line(1, "step", 7), now);
  EXPECT_EQ(r.member, 1);
  EXPECT_EQ(r.event.step(), 7);
  EXPECT_EQ(r.log, "");
  EXPECT_EQ(s.OnLine(Line(2, "eval", 0), now).member, 2);
  EXPECT_EQ(s.OnLine(Line(0, "final", 9, "SUCCEEDED"), now).member, 0);
  EXPECT_EQ(s.member(1).last_step, 7);
  EXPECT_EQ(s.member(2).step0_val_loss.value_or(0), 4.0);
  ASSERT_TRUE(s.member(0).final_event.has_value());
  EXPECT_EQ(s.member(0).final_event->outcome(), "SUCCEEDED");
  EXPECT_FALSE(s.member(1).final_event.has_value());
  // The process's end: the final event, l0 and how the worker stopped it.
  const TrialEnd end = s.member(2).End(ProcessEnd{0, "exit status 0", "", false});
  EXPECT_FALSE(end.final_event.has_value());
  EXPECT_EQ(end.step0_val_loss.value_or(0), 4.0);
  EXPECT_EQ(end.stop, TrialStop::kNone);
  EXPECT_EQ(end.process.description, "exit status 0");

  // An empty line is nothing; the first line of no member is logged, later ones only ignored.
  EXPECT_EQ(s.OnLine("", now).member, -1);
  r = s.OnLine("not json", now);
  EXPECT_EQ(r.member, -1);
  EXPECT_EQ(r.log, "ignoring a non-event line: not json");
  r = s.OnLine(Line(3, "step", 1), now);
  EXPECT_EQ(r.member, -1);
  EXPECT_EQ(r.log, "");

  GroupSupervisor other = Make(2);
  EXPECT_THAT(other.OnLine(Line(5, "step", 1), now).log,
              ::testing::StartsWith("ignoring an event of no trial of this run: {"));
}

TEST_F(GroupSupervisorTest, ASoloTrialGetsSigtermThenSigkillKillAfterLater) {
  GroupSupervisor s = Make(1);
  GroupAction a = At(s, absl::Seconds(1), {Line(0, "step", 1)}, {Cancelled()});
  EXPECT_EQ(a.signal, SIGTERM);
  EXPECT_THAT(a.cancel, IsEmpty());
  EXPECT_THAT(Logs(a), ElementsAre("0: stopping (SIGTERM): the sweep was cancelled"));
  a = At(s, absl::Seconds(3));
  EXPECT_EQ(a.signal, SIGKILL);  // no siblings to wait for
  EXPECT_THAT(Logs(a), ElementsAre("0: still running 3s after SIGTERM; SIGKILL"));
  EXPECT_EQ(s.member(0).End(ProcessEnd{}).stop, TrialStop::kCancel);
  EXPECT_EQ(s.member(0).End(ProcessEnd{}).stop_reason, "the sweep was cancelled");
  // Its final event is the caller's to conclude once the process has exited.
  a = At(s, absl::Seconds(1), {Line(0, "final", 1, "CANCELLED")}, {}, /*exited=*/true);
  EXPECT_EQ(a.signal, 0);
  EXPECT_THAT(a.conclude, IsEmpty());
  EXPECT_FALSE(s.member(0).concluded);
}

TEST_F(GroupSupervisorTest, AFusedMemberStoppedAloneGetsCancelTheLastOnesStopTheProcess) {
  GroupSupervisor s = Make(3);
  GroupAction a = At(s, absl::Seconds(1), {Line(0, "step", 1), Line(1, "step", 1), Line(2, "step", 1)},
                     {{}, Cancelled(), {}});
  EXPECT_EQ(a.signal, 0);
  EXPECT_THAT(a.cancel, ElementsAre(1));
  EXPECT_THAT(Logs(a), ElementsAre("1: stopping (SIGTERM): the sweep was cancelled"));
  a = At(s, absl::Seconds(1), {}, {{}, Cancelled(), {}});
  EXPECT_EQ(a.signal, 0);  // decided once
  EXPECT_THAT(a.cancel, IsEmpty());
  // Nobody left training: the whole process, one SIGTERM.
  a = At(s, absl::Milliseconds(500), {}, {Cancelled(), Cancelled(), Cancelled()});
  EXPECT_EQ(a.signal, SIGTERM);
  EXPECT_THAT(a.cancel, IsEmpty());
  EXPECT_THAT(Logs(a), ElementsAre("0: stopping (SIGTERM): the sweep was cancelled",
                                   "2: stopping (SIGTERM): the sweep was cancelled"));
}

TEST_F(GroupSupervisorTest, ADrainStopsTheWholeGroupWithOneSigterm) {
  GroupSupervisor s = Make(3);
  LeaseFlags drained;
  drained.drain_expired = true;
  const GroupAction a = At(s, absl::Seconds(1), {}, {drained, drained, drained});
  EXPECT_EQ(a.signal, SIGTERM);
  EXPECT_THAT(a.cancel, IsEmpty());
  EXPECT_EQ(a.log.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.member(i).End(ProcessEnd{}).stop, TrialStop::kHandBack);
}

// While a sibling trains, a stopped member's SIGKILL (which would take the
// sibling with it) waits kill_after plus twice the longest gap between two
// events of one trial: the trainer stops it at its next lock step.
TEST_F(GroupSupervisorTest, AStoppedMembersSigkillWaitsForTheLockStepWhileASiblingTrains) {
  GroupSupervisor s = Make(2, 100000);
  At(s, absl::Seconds(2), {Line(0, "step", 1), Line(1, "step", 1)});  // the longest gap: 2 s
  GroupAction a = At(s, absl::Seconds(1), {Line(1, "step", 2)}, {Cancelled(), {}});
  EXPECT_THAT(a.cancel, ElementsAre(0));
  int step = 2;
  for (int i = 0; i < 7; ++i) {  // up to 3 s + 2 x 2 s after the stop
    a = At(s, absl::Seconds(1), {Line(1, "step", ++step)});
    EXPECT_EQ(a.signal, 0) << i;
  }
  EXPECT_THAT(Logs(a), ElementsAre("0: still running 3s after SIGTERM; SIGKILL"));  // asked, not sent
  a = At(s, absl::Milliseconds(100), {Line(1, "step", ++step)});
  EXPECT_EQ(a.signal, SIGKILL);
  EXPECT_THAT(Logs(a), ElementsAre("0: still running 3s after SIGTERM; SIGKILL",
                                   "-1: SIGKILL to the fused process (pid 4242)"));
  EXPECT_EQ(s.member(1).End(ProcessEnd{}).stop, TrialStop::kNone);

  // With no sibling training, no wait.
  GroupSupervisor t = Make(2, 100000);
  EXPECT_THAT(At(t, absl::Seconds(1), {}, {Cancelled(), {}}).cancel, ElementsAre(0));
  a = At(t, absl::Seconds(1), {Line(1, "final", 5, "SUCCEEDED")});
  EXPECT_EQ(a.signal, 0);  // the cancelled member may yet end by itself
  EXPECT_THAT(a.conclude, ElementsAre(1));
  a = At(t, absl::Seconds(2));
  EXPECT_EQ(a.signal, SIGKILL);
  // Exited meanwhile: nothing more.
  EXPECT_EQ(At(t, absl::Seconds(1), {}, {}, /*exited=*/true).signal, 0);
}

TEST_F(GroupSupervisorTest, AFusedMemberWithItsFinalEventIsConcludedAtOnceOnceButNotAFailedOne) {
  GroupSupervisor s = Make(3);
  GroupAction a = At(s, absl::Seconds(1), {Line(0, "final", 5, "SUCCEEDED"), Line(1, "final", 5, "FAILED")});
  EXPECT_THAT(a.conclude, ElementsAre(0));
  EXPECT_TRUE(s.member(0).concluded);
  EXPECT_FALSE(s.member(1).concluded);  // its error may need the process's exit status
  EXPECT_EQ(a.signal, 0);               // trial 2 trains on
  a = At(s, absl::Seconds(1), {Line(2, "final", 5, "DIVERGED")});
  EXPECT_THAT(a.conclude, ElementsAre(2));
  EXPECT_THAT(At(s, absl::Seconds(1)).conclude, IsEmpty());
}

TEST_F(GroupSupervisorTest, AFusedProcessLingeringAfterEveryFinalEventIsKilledOnce) {
  GroupSupervisor s = Make(2);
  GroupAction a = At(s, absl::Seconds(1), {Line(0, "final", 5, "SUCCEEDED"), Line(1, "final", 5, "SUCCEEDED")});
  EXPECT_THAT(a.conclude, ElementsAre(0, 1));
  EXPECT_EQ(At(s, absl::Seconds(3)).signal, 0);  // exactly kill_after: not yet
  a = At(s, absl::Milliseconds(100));
  EXPECT_EQ(a.signal, SIGKILL);
  EXPECT_THAT(Logs(a), ElementsAre("-1: still running 3s after every final event; SIGKILL"));
  EXPECT_EQ(At(s, absl::Seconds(5)).signal, 0);  // once
}

TEST_F(GroupSupervisorTest, PrefetchesOnceWhenEveryMemberStillRunningIsNearItsEnd) {
  GroupSupervisor s = Make(2);
  // Member 0: 10 steps left at 1/9 s each; member 1: 50 at 0.2 s.
  EXPECT_FALSE(At(s, absl::Seconds(10), {Line(0, "step", 90), Line(1, "step", 50)}).prefetch);
  EXPECT_TRUE(At(s, absl::Seconds(2), {Line(1, "step", 90)}).prefetch);
  EXPECT_FALSE(At(s, absl::Seconds(1), {Line(0, "final", 100, "SUCCEEDED")}).prefetch);  // once

  // A stopped member does not hold it back.
  GroupSupervisor t = Make(2);
  EXPECT_FALSE(At(t, absl::Seconds(1), {}, {{}, Cancelled()}).prefetch);
  EXPECT_TRUE(At(t, absl::Seconds(1), {Line(0, "final", 100, "SUCCEEDED")}).prefetch);
}

}  // namespace
}  // namespace normsweep::worker
