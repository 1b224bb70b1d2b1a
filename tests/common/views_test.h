// The base of tests of the SQL views (db/views/) on hand-inserted rows: a
// fresh database with the migrations applied, the real store over it
// (store_: the views as the CLI and the report read them, through
// GetSweepAnalysis) and a plain connection (conn_) that inserts the rows and
// reads the views directly.
#ifndef NORMSWEEP_TESTS_COMMON_VIEWS_TEST_H_
#define NORMSWEEP_TESTS_COMMON_VIEWS_TEST_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "db/pg_connection.h"
#include "db/store.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::testing {

// A row of the trials table, as the views read it.
struct TrialRow {
  std::string variant;
  std::string placement;
  int warmup_steps = 0;
  double peak_lr = 0.0;
  int seed = 0;
  std::string state;  // "SUCCEEDED", "DIVERGED", ...
  std::optional<double> final_val_loss;
  std::optional<double> init_val_loss;  // the column; a step-0 metric row is the test's to insert
  std::string config = "{}";            // JSON
  std::optional<double> unigram_loss;        // FinishTrial's, for the failure rule
  std::optional<double> val_loss_progress;   // FinishTrial's, for the failure rule
};

class ViewsTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // A COMPLETED sweep named `name` with spec (JSON); returns its id, or 0
  // after failing the test.
  int64_t AddSweep(const std::string& name = "s", const std::string& spec = "{}");
  // A trial of `sweep`, the next index of that sweep; returns its id, or 0
  // after failing the test.
  int64_t AddTrial(int64_t sweep, const TrialRow& row);
  // trial_loss_values.failure of each trial of the sweep, by trial id
  // ("NULL" for NULL: not judged).
  std::map<int64_t, std::string> Failures(int64_t sweep);
  // GetSweepAnalysis through the store; an empty response after failing
  // the test.
  v1::GetSweepAnalysisResponse Analysis(int64_t sweep, double tolerance = 0.05);

  std::string conninfo_;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<db::PgConnection> conn_;
};

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_VIEWS_TEST_H_
