// The base of the tests of the failure rule's views (training_failure_test.cc,
// not_converged_test.cc): one-seed trials as the views read them, with the
// unigram loss and val_loss progress their finish stored, and the rows of
// GetSweepAnalysis looked up by what they describe. Header-only.
#ifndef NORMSWEEP_TESTS_DB_FAILURE_VIEWS_TEST_H_
#define NORMSWEEP_TESTS_DB_FAILURE_VIEWS_TEST_H_

#include <cstdint>
#include <optional>
#include <string>

#include "normsweep/v1/sweep_service.pb.h"
#include "tests/common/views_test.h"

namespace normsweep::db {

// The paper sweep's data: stalled runs end at 3.40-3.45.
inline constexpr double kUnigram = 3.41;

class FailureViewsTest : public testing::ViewsTest {
 protected:
  int64_t Add(int64_t sweep, const std::string& placement, double lr, int seed, const std::string& state,
              std::optional<double> final_val_loss, std::optional<double> unigram_loss,
              std::optional<double> val_loss_progress = std::nullopt) {
    return AddTrial(sweep, {.placement = placement, .peak_lr = lr, .seed = seed, .state = state,
                            .final_val_loss = final_val_loss, .unigram_loss = unigram_loss,
                            .val_loss_progress = val_loss_progress});
  }

  // The (first) grid cell of placement at lr, or the placement's row, in a;
  // null when there is none.
  static const v1::GridCell* Cell(const v1::GetSweepAnalysisResponse& a, const std::string& placement, double lr) {
    for (const v1::GridCell& c : a.cells()) {
      if (c.placement() == placement && c.peak_lr() == lr) return &c;
    }
    return nullptr;
  }
  static const v1::PlacementSensitivity* Placement(const v1::GetSweepAnalysisResponse& a,
                                                   const std::string& placement) {
    for (const v1::PlacementSensitivity& p : a.placements()) {
      if (p.placement() == placement) return &p;
    }
    return nullptr;
  }
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_TESTS_DB_FAILURE_VIEWS_TEST_H_
