// The bracketing rule on synthetic outcomes: a line is simulated by a
// function lr -> outcome, run through DecideLine until it stops.
#include "proto/schema/boundary_search.h"
#include "proto/schema/failure.h"

#include <cmath>
#include <functional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::schema {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::Optional;

BoundarySettings ThreeDecades() {
  v1::BoundarySearch b;
  b.set_lr_min(1e-4);
  b.set_lr_max(1e-1);
  return BoundarySettingsOf(b);
}

// Runs a line to its end: the coarse start, then one trial at a time.
struct LineRun {
  LineDecision last;
  std::vector<Probe> probes;
};
LineRun Simulate(const BoundarySettings& s, const std::function<ProbeOutcome(double)>& outcome, int max_trials = 100) {
  LineRun run;
  for (double lr : InitialLrs(s)) run.probes.push_back({lr, outcome(lr)});
  for (;;) {
    run.last = DecideLine(s, run.probes);
    if (!run.last.next_lr || static_cast<int>(run.probes.size()) >= max_trials) return run;
    // While a trial is open nothing more is asked for.
    std::vector<Probe> with_open = run.probes;
    with_open.push_back({*run.last.next_lr, ProbeOutcome::kOpen});
    const LineDecision waiting = DecideLine(s, with_open);
    EXPECT_EQ(waiting.state, LineState::kSearching);
    EXPECT_FALSE(waiting.next_lr.has_value());
    run.probes.push_back({*run.last.next_lr, outcome(*run.last.next_lr)});
  }
}

ProbeOutcome Below(double lr, double boundary) {
  return lr <= boundary ? ProbeOutcome::kTrainable : ProbeOutcome::kUntrainable;
}

TEST(BoundarySettingsTest, Defaults) {
  const BoundarySettings s = ThreeDecades();
  EXPECT_EQ(s.resolution, 1.25);
  EXPECT_EQ(s.initial_points, 4);  // ceil(log10(1000)) + 1, though log10(1000) is not exactly 3 in floating point
  EXPECT_EQ(s.min_improvement, 0.5);
  EXPECT_FALSE(s.max_val_loss.has_value());
  EXPECT_EQ(DefaultInitialPoints(1e-3, 2e-3), 2);   // less than a decade: both ends
  EXPECT_EQ(DefaultInitialPoints(1e-4, 3e-2), 4);   // 2.48 decades
  EXPECT_EQ(DefaultInitialPoints(1e-5, 1e-1), 5);
}

TEST(BoundarySettingsTest, InitialLrsAreLogSpacedWithExactEnds) {
  const std::vector<double> lrs = InitialLrs(ThreeDecades());
  ASSERT_EQ(lrs.size(), 4u);
  EXPECT_EQ(lrs[0], 1e-4);
  EXPECT_THAT(lrs[1], DoubleNear(1e-3, 1e-15));
  EXPECT_THAT(lrs[2], DoubleNear(1e-2, 1e-14));
  EXPECT_EQ(lrs[3], 1e-1);
}

TEST(ClassifyProbeTest, Criterion) {
  BoundarySettings s = ThreeDecades();
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_PENDING, {}, {}, std::nullopt, {}, s), ProbeOutcome::kOpen);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_RUNNING, {}, {}, std::nullopt, {}, s), ProbeOutcome::kOpen);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_DIVERGED, 2.0, 5.8, std::nullopt, {}, s), ProbeOutcome::kUntrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_FAILED, {}, {}, std::nullopt, {}, s), ProbeOutcome::kFailed);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_CANCELLED, {}, {}, std::nullopt, {}, s), ProbeOutcome::kCancelled);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 5.3, 5.8, std::nullopt, {}, s), ProbeOutcome::kTrainable);    // exactly 0.5 below
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 5.31, 5.8, std::nullopt, {}, s), ProbeOutcome::kUntrainable); // too little
  // The unigram plateau (schema::kPlateauMargin 0.1): 3.35 is 2.45 below l0
  // but within 0.1 of the unigram loss 3.41, so it learnt nothing more.
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.35, 5.8, 3.41, {}, s), ProbeOutcome::kUntrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.45, 5.8, 3.41, {}, s), ProbeOutcome::kUntrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.30, 5.8, 3.41, {}, s), ProbeOutcome::kTrainable);
  // Near the unigram loss but still falling by kProgressMargin or more over
  // the last quarter: not converged, which is trainable (it is learning);
  // less progress, or none measured, is the plateau.
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.35, 5.8, 3.41, kProgressMargin, s), ProbeOutcome::kTrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.35, 5.8, 3.41, 0.23, s), ProbeOutcome::kTrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.35, 5.8, 3.41, kProgressMargin / 2, s), ProbeOutcome::kUntrainable);
  // Without l0 the plateau alone judges it.
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 2.5, {}, 3.41, {}, s), ProbeOutcome::kTrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.4, {}, 3.41, {}, s), ProbeOutcome::kUntrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, NAN, 5.8, std::nullopt, {}, s), ProbeOutcome::kUntrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, {}, 5.8, std::nullopt, {}, s), ProbeOutcome::kUntrainable);
  // No l0 and no absolute threshold: cannot be judged.
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 2.0, {}, std::nullopt, {}, s), ProbeOutcome::kFailed);
  s.max_val_loss = 4.0;
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 2.0, {}, std::nullopt, {}, s), ProbeOutcome::kTrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 4.5, {}, std::nullopt, {}, s), ProbeOutcome::kUntrainable);
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 4.5, 5.8, std::nullopt, {}, s), ProbeOutcome::kUntrainable);  // both must hold
  // max_val_loss keeps precedence over a run that has not converged.
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.35, 5.8, 3.41, 0.23, s), ProbeOutcome::kTrainable);
  s.max_val_loss = 3.0;
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.35, 5.8, 3.41, 0.23, s), ProbeOutcome::kUntrainable);
  s.max_val_loss = 4.0;
  s.min_improvement = 2.0;
  EXPECT_EQ(ClassifyProbe(v1::TRIAL_SUCCEEDED, 3.9, 5.8, std::nullopt, {}, s), ProbeOutcome::kUntrainable);
}

TEST(DecideLineTest, MonotoneLineFindsTheBoundaryInEightTrials) {
  const BoundarySettings s = ThreeDecades();
  const double boundary = 3.7e-3;
  const LineRun run = Simulate(s, [&](double lr) { return Below(lr, boundary); });
  EXPECT_EQ(run.last.state, LineState::kFound);
  ASSERT_TRUE(run.last.max_trainable_lr && run.last.min_untrainable_lr);
  EXPECT_LE(*run.last.max_trainable_lr, boundary);
  EXPECT_GT(*run.last.min_untrainable_lr, boundary);
  EXPECT_LE(*run.last.min_untrainable_lr / *run.last.max_trainable_lr, 1.25);
  // 4 coarse + 4 bisections of one decade (10 -> 3.16 -> 1.78 -> 1.33 -> 1.15);
  // a grid at ratio 1.25 over three decades has 32 points.
  EXPECT_EQ(run.probes.size(), 8u);
  EXPECT_EQ(run.last.trials, 8);
  EXPECT_EQ(run.last.finished, 8);
}

TEST(DecideLineTest, EverywhereTrainable) {
  const LineRun run = Simulate(ThreeDecades(), [](double) { return ProbeOutcome::kTrainable; });
  EXPECT_EQ(run.last.state, LineState::kTrainableEverywhere);
  EXPECT_THAT(run.last.max_trainable_lr, Optional(1e-1));
  EXPECT_FALSE(run.last.min_untrainable_lr.has_value());
  EXPECT_EQ(run.probes.size(), 4u);  // no follow-up
}

TEST(DecideLineTest, NowhereTrainable) {
  const LineRun run = Simulate(ThreeDecades(), [](double) { return ProbeOutcome::kUntrainable; });
  EXPECT_EQ(run.last.state, LineState::kNowhereTrainable);
  EXPECT_FALSE(run.last.max_trainable_lr.has_value());
  EXPECT_THAT(run.last.min_untrainable_lr, Optional(1e-4));
  EXPECT_EQ(run.probes.size(), 4u);
}

TEST(DecideLineTest, SlowLowEndIsNotTheBoundary) {
  // Post-LN-like: lr_min trains too slowly to get below l0 - 0.5, 1e-3 and
  // 1e-2 train, 1e-1 diverges. The boundary lies between 1e-2 and 1e-1.
  const LineRun run = Simulate(ThreeDecades(), [](double lr) {
    if (lr < 5e-4) return ProbeOutcome::kUntrainable;
    return Below(lr, 2.2e-2);
  });
  EXPECT_EQ(run.last.state, LineState::kFound);
  EXPECT_GE(*run.last.max_trainable_lr, 1e-2);
  EXPECT_LE(*run.last.max_trainable_lr, 2.2e-2);
  EXPECT_GT(*run.last.min_untrainable_lr, 2.2e-2);
  EXPECT_EQ(run.probes.size(), 8u);
}

TEST(DecideLineTest, TrainableProbeAboveAnUntrainableOneMovesTheBracketUp) {
  const BoundarySettings s = ThreeDecades();
  // 1e-3 untrainable (a bad seed's blip), 1e-2 trainable, 1e-1 diverged.
  const LineDecision d = DecideLine(s, {{1e-4, ProbeOutcome::kTrainable},
                                        {1e-3, ProbeOutcome::kUntrainable},
                                        {1e-2, ProbeOutcome::kTrainable},
                                        {1e-1, ProbeOutcome::kUntrainable}});
  EXPECT_EQ(d.state, LineState::kSearching);
  EXPECT_THAT(d.max_trainable_lr, Optional(1e-2));
  EXPECT_THAT(d.min_untrainable_lr, Optional(1e-1));
  ASSERT_TRUE(d.next_lr.has_value());
  EXPECT_THAT(*d.next_lr, DoubleNear(std::sqrt(1e-3), 1e-15));
}

TEST(DecideLineTest, DivergedSeedStopsOnlyItsOwnLine) {
  // Lines are per seed: the seed whose 1e-2 run diverged brackets lower than
  // the seed that trains there; neither needs the other's trials.
  const BoundarySettings s = ThreeDecades();
  const LineRun steady = Simulate(s, [](double lr) { return Below(lr, 2e-2); });
  const LineRun unlucky = Simulate(s, [](double lr) {
    if (std::abs(lr - 1e-2) < 1e-12) return ProbeOutcome::kUntrainable;  // diverged at 1e-2
    return Below(lr, 2e-2);
  });
  EXPECT_EQ(steady.last.state, LineState::kFound);
  EXPECT_EQ(unlucky.last.state, LineState::kFound);
  EXPECT_GE(*steady.last.max_trainable_lr, 1e-2);
  EXPECT_LT(*unlucky.last.max_trainable_lr, 1e-2);
  EXPECT_LE(*unlucky.last.min_untrainable_lr, 1e-2 * (1 + 1e-12));  // the coarse 1e-2, as exp() makes it
}

TEST(DecideLineTest, FailedProbeStopsTheLine) {
  const BoundarySettings s = ThreeDecades();
  const LineDecision d = DecideLine(s, {{1e-4, ProbeOutcome::kTrainable},
                                        {1e-3, ProbeOutcome::kFailed},
                                        {1e-2, ProbeOutcome::kTrainable},
                                        {1e-1, ProbeOutcome::kUntrainable}});
  EXPECT_EQ(d.state, LineState::kFailed);
  EXPECT_FALSE(d.next_lr.has_value());
  EXPECT_THAT(d.max_trainable_lr, Optional(1e-2));  // how far it got
  // Even while another probe is still open.
  const LineDecision open = DecideLine(s, {{1e-4, ProbeOutcome::kFailed}, {1e-1, ProbeOutcome::kOpen}});
  EXPECT_EQ(open.state, LineState::kFailed);
  EXPECT_EQ(open.finished, 1);
  EXPECT_EQ(open.trials, 2);
}

TEST(DecideLineTest, CancelledProbeCancelsTheLine) {
  const LineDecision d = DecideLine(ThreeDecades(), {{1e-4, ProbeOutcome::kTrainable},
                                                     {1e-3, ProbeOutcome::kCancelled},
                                                     {1e-1, ProbeOutcome::kUntrainable}});
  EXPECT_EQ(d.state, LineState::kCancelled);
  EXPECT_FALSE(d.next_lr.has_value());
}

TEST(DecideLineTest, NothingDecidedWhileCoarseProbesAreOpen) {
  const LineDecision d = DecideLine(ThreeDecades(), {{1e-4, ProbeOutcome::kTrainable},
                                                     {1e-3, ProbeOutcome::kOpen},
                                                     {1e-2, ProbeOutcome::kUntrainable},
                                                     {1e-1, ProbeOutcome::kUntrainable}});
  EXPECT_EQ(d.state, LineState::kSearching);
  EXPECT_FALSE(d.next_lr.has_value());
  EXPECT_EQ(d.finished, 3);
}

TEST(DecideLineTest, ResolutionReachedExactly) {
  BoundarySettings s = ThreeDecades();
  // 3e-3 / 2.4e-3 is 1.2500000000000002 in doubles: reached all the same.
  EXPECT_GT(3e-3 / 2.4e-3, 1.25);
  const LineDecision d = DecideLine(s, {{2.4e-3, ProbeOutcome::kTrainable}, {3e-3, ProbeOutcome::kUntrainable}});
  EXPECT_EQ(d.state, LineState::kFound);
  const LineDecision exact = DecideLine(s, {{1e-3, ProbeOutcome::kTrainable}, {1.25e-3, ProbeOutcome::kUntrainable}});
  EXPECT_EQ(exact.state, LineState::kFound);
  // Just above it: one more bisection.
  const LineDecision more = DecideLine(s, {{1e-3, ProbeOutcome::kTrainable}, {1.26e-3, ProbeOutcome::kUntrainable}});
  EXPECT_EQ(more.state, LineState::kSearching);
  ASSERT_TRUE(more.next_lr.has_value());
  EXPECT_THAT(*more.next_lr, DoubleNear(std::sqrt(1e-3 * 1.26e-3), 1e-18));
}

TEST(DecideLineTest, CoarserResolutionStopsEarlier) {
  BoundarySettings s = ThreeDecades();
  s.resolution = 2;
  const LineRun run = Simulate(s, [](double lr) { return Below(lr, 3.7e-3); });
  EXPECT_EQ(run.last.state, LineState::kFound);
  EXPECT_EQ(run.probes.size(), 6u);  // 10 -> 3.16 -> 1.78
  EXPECT_LE(*run.last.min_untrainable_lr / *run.last.max_trainable_lr, 2.0);
}

TEST(DecideLineTest, StateNames) {
  std::vector<std::string> names;
  for (LineState st : {LineState::kSearching, LineState::kFound, LineState::kTrainableEverywhere,
                       LineState::kNowhereTrainable, LineState::kCancelled, LineState::kFailed}) {
    names.push_back(LineStateName(st));
    EXPECT_EQ(IsLineDone(st), st != LineState::kSearching);
  }
  EXPECT_THAT(names, ElementsAre("SEARCHING", "FOUND", "TRAINABLE_EVERYWHERE", "NOWHERE_TRAINABLE", "CANCELLED",
                                 "FAILED"));
}

}  // namespace
}  // namespace normsweep::schema
