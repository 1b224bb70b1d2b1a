// The one rule of failing to train (proto/schema/failure.h).
#include "proto/schema/failure.h"

#include <cmath>
#include <optional>

#include <gtest/gtest.h>

namespace normsweep::schema {
namespace {

TEST(ClassifyTrainingTest, OnlyRunsThatEndedAreJudged) {
  for (v1::TrialState s : {v1::TRIAL_PENDING, v1::TRIAL_RUNNING, v1::TRIAL_FAILED, v1::TRIAL_CANCELLED}) {
    EXPECT_EQ(ClassifyTraining(s, 2.0, 3.41, std::nullopt), std::nullopt) << s;
  }
}

TEST(ClassifyTrainingTest, DivergenceNoLossPlateauAndMaxValLoss) {
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_DIVERGED, 2.0, 3.41, std::nullopt), TrainingFailure::kDiverged);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, std::nullopt, 3.41, std::nullopt), TrainingFailure::kNoFiniteLoss);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, NAN, 3.41, std::nullopt), TrainingFailure::kNoFiniteLoss);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, INFINITY, 3.41, std::nullopt), TrainingFailure::kNoFiniteLoss);
  // Within kPlateauMargin of the unigram loss, or above it (slower still).
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, 3.41, std::nullopt), TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.32, 3.41, std::nullopt), TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.48, 3.41, std::nullopt), TrainingFailure::kPlateau);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.30, 3.41, std::nullopt), TrainingFailure::kNone);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 2.20, 3.41, std::nullopt), TrainingFailure::kNone);
  // Without a unigram loss (an older worker) only the other rules judge.
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, std::nullopt, std::nullopt), TrainingFailure::kNone);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.0, std::nullopt, 2.9), TrainingFailure::kAboveMaxValLoss);
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 2.9, std::nullopt, 2.9), TrainingFailure::kNone);
  // The plateau is named first when both hold.
  EXPECT_EQ(ClassifyTraining(v1::TRIAL_SUCCEEDED, 3.41, 3.41, 3.2), TrainingFailure::kPlateau);
}

TEST(ClassifyTrainingTest, FromTheApiTrialAndNames) {
  v1::Trial t;
  t.set_state(v1::TRIAL_SUCCEEDED);
  t.mutable_result()->set_final_val_loss(3.40);
  EXPECT_EQ(ClassifyTraining(t, std::nullopt), TrainingFailure::kNone);  // no unigram loss reported
  t.mutable_result()->set_unigram_loss(3.41);
  EXPECT_EQ(ClassifyTraining(t, std::nullopt), TrainingFailure::kPlateau);
  EXPECT_EQ(FailureName(TrainingFailure::kPlateau), "plateau");
  EXPECT_EQ(FailureName(TrainingFailure::kAboveMaxValLoss), "above_max_val_loss");
  EXPECT_EQ(FailureName(TrainingFailure::kNone), "");
}

}  // namespace
}  // namespace normsweep::schema
