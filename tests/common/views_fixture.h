// The analysis views' figures for hand-made trials: the trials are stored in
// a throwaway PostgreSQL (the process's shared instance, a fresh database per
// call) with their states and final losses, through the real store, and
// GetSweepAnalysis reads them back. For tests of what the CLI and the report
// show: they render the views' figures, never compute their own.
#ifndef NORMSWEEP_TESTS_COMMON_VIEWS_FIXTURE_H_
#define NORMSWEEP_TESTS_COMMON_VIEWS_FIXTURE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::testing {

struct ViewsFixtureOptions {
  double tolerance = 0.05;
  v1::SweepSpec spec;  // stored as the sweep's spec (e.g. random_search set); its name is set when empty
};

// Each trial's placement, warm-up, lr, seed, variant, state and
// result are used (RUNNING ones stay leased; PENDING ones, which must come
// last, stay in the queue). A result's init_val_loss (l0) arrives as the
// worker sends it: a step-0 metric row with that val_loss, reported while
// the trial runs, and FinishTrial's result.
absl::StatusOr<v1::GetSweepAnalysisResponse> AnalysisFromViews(const std::vector<v1::Trial>& trials,
                                                               const ViewsFixtureOptions& options);
absl::StatusOr<v1::GetSweepAnalysisResponse> AnalysisFromViews(const std::vector<v1::Trial>& trials,
                                                               double tolerance = 0.05);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_VIEWS_FIXTURE_H_
