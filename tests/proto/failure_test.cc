// The one rule of failing to train (proto/schema/failure.h), and the
// trainer's val_loss_progress that it reads (trainer/settings/val_loss_progress.h).
#include "proto/schema/failure.h"

#include <cmath>
#include <optional>

#include <gtest/gtest.h>

#include "trainer/settings/val_loss_progress.h"

namespace normsweep::schema {
namespace {

constexpr std::nullopt_t kNone = std::nullopt;

TEST(ClassifyTrainingTest, OnlyRunsThatEndedAreJudged) {
  for (v1::TrialState s : {v1::TRIAL_PENDING, v1::TRIAL_RUNNING, v1::TRIAL_FAILED, v1::TRIAL_CANCELLED}) {
    EXPECT_EQ(ClassifyTraining(s, 2.0, 3.41, 0.5, kNone), std::nullopt) << s;
  }
}

TEST(ClassifyTrainingTest, DivergenceNoLossPlateauAndMaxValLoss) {
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_DIVERGED, 2.0, 3.41, kNone, kNone), TrainingFailure::kDiverged);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, kNone, 3.41, kNone, kNone), TrainingFailure::kNoFiniteLoss);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, NAN, 3.41, kNone, kNone), TrainingFailure::kNoFiniteLoss);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, INFINITY, 3.41, 1.0, kNone), TrainingFailure::kNoFiniteLoss);
  // Within kPlateauMargin of the unigram loss, or above it (slower still).
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, 3.41, kNone, kNone), TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.32, 3.41, kNone, kNone), TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.48, 3.41, kNone, kNone), TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.30, 3.41, kNone, kNone), TrainingFailure::kNone);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 2.20, 3.41, kNone, kNone), TrainingFailure::kNone);
  // Without a unigram loss (an older worker) only the other rules judge.
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, kNone, kNone, kNone), TrainingFailure::kNone);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.0, kNone, kNone, 2.9), TrainingFailure::kAboveMaxValLoss);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 2.9, kNone, kNone, 2.9), TrainingFailure::kNone);
  // The plateau is named first when both hold.
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, 3.41, kNone, 3.2), TrainingFailure::kPlateau);
}

TEST(ClassifyTrainingTest, StillLearningNearTheUnigramLossIsNotConverged) {
  // The run: 3.57, 3.14, 2.91 at steps 40, 60, 80 against a unigram
  // loss of 2.95: 0.23 of progress over the last quarter.
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 2.91, 2.95, 0.23, kNone), TrainingFailure::kNotConverged);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.48, 3.41, kProgressMargin, kNone), TrainingFailure::kNotConverged);
  // Less progress than kProgressMargin, none measured (fewer than 3
  // evaluations, an older worker) or a non-finite one: the plateau.
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, 3.41, kProgressMargin * 0.99, kNone),
            TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, 3.41, -0.3, kNone), TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, 3.41, kNone, kNone), TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, 3.41, INFINITY, kNone), TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, 3.41, NAN, kNone), TrainingFailure::kPlateau);
  // Progress alone labels nothing: far below the unigram loss it trained.
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 2.2, 3.41, 0.4, kNone), TrainingFailure::kNone);
  // max_val_loss keeps precedence over not_converged.
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.35, 3.41, 0.3, 3.0), TrainingFailure::kAboveMaxValLoss);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.35, 3.41, 0.3, 3.4), TrainingFailure::kNotConverged);
  // Diverged is diverged whatever the progress.
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_DIVERGED, 3.35, 3.41, 0.3, kNone), TrainingFailure::kDiverged);
}

TEST(ClassifyTrainingTest, WhichLabelsAreFailures) {
  EXPECT_FALSE(FailedToTrain(TrainingFailure::kNone));
  EXPECT_FALSE(FailedToTrain(TrainingFailure::kNotConverged));
  for (TrainingFailure f : {TrainingFailure::kDiverged, TrainingFailure::kNoFiniteLoss, TrainingFailure::kPlateau,
                            TrainingFailure::kAboveMaxValLoss}) {
    EXPECT_TRUE(FailedToTrain(f)) << FailureName(f);
  }
}

TEST(ClassifyTrainingTest, FromTheApiTrialAndNames) {
  v1::Trial t;
  t.set_state(v1::TRIAL_SUCCEEDED);
  t.mutable_result()->set_final_val_loss(3.40);
  EXPECT_EQ(ClassifyTraining(t, kNone), TrainingFailure::kNone);  // no unigram loss reported
  t.mutable_result()->set_unigram_loss(3.41);
  EXPECT_EQ(ClassifyTraining(t, kNone), TrainingFailure::kPlateau);
  t.mutable_result()->set_val_loss_progress(0.2);
  EXPECT_EQ(ClassifyTraining(t, kNone), TrainingFailure::kNotConverged);
  EXPECT_EQ(FailureName(TrainingFailure::kPlateau), "plateau");
  EXPECT_EQ(FailureName(TrainingFailure::kAboveMaxValLoss), "above_max_val_loss");
  EXPECT_EQ(FailureName(TrainingFailure::kNotConverged), "not_converged");
  EXPECT_EQ(FailureName(TrainingFailure::kNone), "");
}

TEST(ValLossProgressTest, TheLastQuartersFall) {
  using trainer::ValLossProgress;
  // 80 steps, evaluations every 20: floor(0.75 * 80) = 60 is the reference.
  auto p = ValLossProgress({{0, 5.5}, {20, 4.2}, {40, 3.57}, {60, 3.14}, {80, 2.91}}, 80);
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(*p, 0.23, 1e-12);
  // The last evaluation at or before the cut: 70 steps cut at 52, so step 50.
  p = ValLossProgress({{0, 5.5}, {25, 4.0}, {50, 3.5}, {70, 3.4}}, 70);
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(*p, 0.1, 1e-12);
  // A loss that rose over the last quarter: a negative progress.
  p = ValLossProgress({{0, 5.5}, {300, 3.0}, {400, 3.4}}, 400);
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(*p, -0.4, 1e-12);
  // Evaluated only at the end beside step 0 and one early point: the
  // reference is the last one at or before the cut.
  p = ValLossProgress({{0, 5.5}, {10, 4.0}, {400, 3.4}}, 400);
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(*p, 0.6, 1e-12);
  // Evaluations too sparse for the last quarter: the reference would be step
  // 0 (l0), and the fall from initialisation is no progress measure.
  EXPECT_EQ(ValLossProgress({{0, 5.5}, {350, 3.5}, {400, 3.4}}, 400), std::nullopt);
  // Fewer than 3 evaluations (step 0 counted): not judged.
  EXPECT_EQ(ValLossProgress({{0, 5.5}, {400, 3.4}}, 400), std::nullopt);
  EXPECT_EQ(ValLossProgress({{400, 3.4}}, 400), std::nullopt);
  // A non-finite result is not a progress.
  EXPECT_EQ(ValLossProgress({{0, 5.5}, {200, INFINITY}, {400, 3.4}}, 400), std::nullopt);
}

}  // namespace
}  // namespace normsweep::schema
