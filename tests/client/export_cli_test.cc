// `normsweep export` as a user runs it: a throwaway PostgreSQL, rows written
// through the store as a worker would, a real normsweep-scheduler, the CLI
// over gRPC. Values read back exactly (awkward doubles, NaN, the extremes),
// absent ones are empty; --since continues after a cursor with no row twice
// and none missing; --follow ends with the sweep; grad_norms comes in the
// stored, long shape; bad input gets a clear message and exit status.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/leased_sweep.h"
#include "tests/common/metric_points.h"
#include "tests/common/process_test.h"
#include "tests/common/read_file.h"
#include "tests/common/requests.h"
#include "tests/common/served_store_test.h"
#include "tests/common/subprocess.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::ReadFile;

// The metrics columns, in the export's order.
const std::vector<std::string> kMetricColumns = {"trial_id",  "step",         "lr",           "train_loss",
                                                 "val_loss",  "val_accuracy", "grad_norm",    "tokens_per_s",
                                                 "output_log_z", "z_term"};

// A metric row as the CLI printed it: the text of each column.
using Row = std::vector<std::string>;

// What a test wrote for a (trial, step): every metric by column name.
using Written = std::map<std::pair<int64_t, int>, std::map<std::string, double>>;

class ExportCliTest : public testing::ServedStoreTest {
 protected:
  // A sweep of two trials (post, pre; lr 1e-3, 100 steps), both leased by
  // worker "export-test", written through the store as a worker would.
  void WriteRows() override {
    v1::SweepSpec spec;
    spec.set_name("export");
    spec.set_max_attempts(1);
    auto sweep = testing::CreateLeasedSweep(*store_, spec, testing::PostPreTrials(), "export-test", absl::Now());
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    sweep_id_ = sweep->sweep_id;
    worker_ = sweep->worker;
    leased_ = sweep->trials;
    ASSERT_EQ(leased_.size(), 2u);
  }

  // Steps [from, to) of trial i: values that %.6g would round, NaN, the
  // largest and the smallest doubles, and absent ones.
  void Report(int i, int from, int to) {
    v1::ReportProgressRequest progress = testing::ProgressOf(worker_, leased_[i]);
    for (int step = from; step < to; ++step) {
      v1::MetricPoint* m = testing::AddPoint(progress, step);
      std::map<std::string, double>& w = written_[{leased_[i].id(), step}];
      m->set_lr(w["lr"] = 1e-3 * step / 7.0);
      m->set_train_loss(w["train_loss"] = step == 13 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / 3 + step);
      if (step % 10 == 0) m->set_val_loss(w["val_loss"] = 2.0 + i + 1.0 / (step + 3));
      m->set_grad_norm(w["grad_norm"] = step == 7    ? std::numeric_limits<double>::max()
                                         : step == 8 ? std::numeric_limits<double>::denorm_min()
                                                     : 0.1 * (step + 1));
    }
    ASSERT_TRUE(store_->ReportProgress(progress, absl::Now()).ok());
  }

  void Finish(int i) {
    v1::FinishTrialRequest finish = testing::FinishOf(worker_, leased_[i], v1::TRIAL_SUCCEEDED);
    finish.mutable_result()->set_final_val_loss(2.5);
    ASSERT_TRUE(store_->FinishTrial(finish, absl::Now()).ok());
  }

  std::string Id() const { return std::to_string(sweep_id_); }

  // The CSV lines of file, the header checked and left out.
  static std::vector<Row> ReadCsv(const std::string& path, bool header = true) {
    std::vector<Row> rows;
    bool first = header;
    for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
      Row row = absl::StrSplit(line, ',');
      if (first) {
        EXPECT_EQ(row, kMetricColumns);
        first = false;
        continue;
      }
      EXPECT_EQ(row.size(), kMetricColumns.size()) << line;
      rows.push_back(std::move(row));
    }
    return rows;
  }

  static std::string CursorOf(const std::string& output) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(output, m, std::regex("cursor: (\\S+)"))) << output;
    return m.size() > 1 ? m[1].str() : "";
  }

  // Every row matches what was written, value for value; each key once.
  void ExpectWritten(const std::vector<Row>& rows, const std::set<std::pair<int64_t, int>>& keys) {
    std::set<std::pair<int64_t, int>> seen;
    for (const Row& row : rows) {
      ASSERT_EQ(row.size(), kMetricColumns.size());
      const std::pair<int64_t, int> key{std::stoll(row[0]), std::stoi(row[1])};
      EXPECT_TRUE(seen.insert(key).second) << "twice: " << row[0] << "," << row[1];
      ASSERT_TRUE(written_.contains(key)) << row[0] << "," << row[1];
      const std::map<std::string, double>& w = written_[key];
      for (size_t c = 2; c < kMetricColumns.size(); ++c) {
        auto it = w.find(kMetricColumns[c]);
        if (it == w.end()) {
          EXPECT_EQ(row[c], "") << kMetricColumns[c] << " at " << row[0] << "," << row[1];
        } else if (std::isnan(it->second)) {
          EXPECT_EQ(row[c], "nan");
        } else {
          // Exactly the double written: strtod of the text gives it back.
          EXPECT_EQ(std::strtod(row[c].c_str(), nullptr), it->second) << kMetricColumns[c] << " = " << row[c];
        }
      }
    }
    EXPECT_EQ(seen, keys);
  }

  std::set<std::pair<int64_t, int>> AllKeys() const {
    std::set<std::pair<int64_t, int>> keys;
    for (const auto& [k, v] : written_) keys.insert(k);
    return keys;
  }

  int64_t sweep_id_ = 0;
  int64_t worker_ = 0;
  std::vector<v1::Trial> leased_;
  Written written_;
};

TEST_F(ExportCliTest, MetricsReadBackExactlyAndSinceContinuesAfterTheCursor) {
  ASSERT_NO_FATAL_FAILURE(Report(0, 0, 30));
  ASSERT_NO_FATAL_FAILURE(Report(1, 0, 20));
  const std::string first = dir_ + "/first.csv";
  CommandResult r = Cli({"export", Id(), "--table", "metrics", "--out", first});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string cursor = CursorOf(r.output);
  ExpectWritten(ReadCsv(first), AllKeys());
  // Shortest text, not %.17g: 0.1 * 3 is the double 0.30000000000000004.
  EXPECT_THAT(ReadFile(first), HasSubstr(",0.30000000000000004,"));
  const std::set<std::pair<int64_t, int>> before = AllKeys();

  // More rows, then only those with --since, without a header.
  ASSERT_NO_FATAL_FAILURE(Report(0, 30, 45));
  ASSERT_NO_FATAL_FAILURE(Report(1, 20, 25));
  const std::string next = dir_ + "/next.csv";
  r = Cli({"export", Id(), "--table", "metrics", "--since", cursor, "--no-header", "--out", next});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::pair<int64_t, int>> added;
  for (const auto& k : AllKeys()) {
    if (!before.contains(k)) added.insert(k);
  }
  ExpectWritten(ReadCsv(next, /*header=*/false), added);
  // Nothing new since the second cursor.
  r = Cli({"export", Id(), "--table", "metrics", "--since", CursorOf(r.output), "--out", dir_ + "/none.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadFile(dir_ + "/none.csv"), absl::StrJoin(kMetricColumns, ",") + "\n");
}

TEST_F(ExportCliTest, ChosenMetricsAndJsonLines) {
  ASSERT_NO_FATAL_FAILURE(Report(0, 0, 12));
  const std::string out = dir_ + "/m.jsonl";
  CommandResult r =
      Cli({"export", Id(), "--table", "metrics", "--metrics", "val_loss, lr", "--format", "jsonl", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> lines = absl::StrSplit(ReadFile(out), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 12u);
  const int64_t t = leased_[0].id();
  EXPECT_EQ(lines[0], absl::StrCat("{\"trial_id\":", t, ",\"step\":0,\"val_loss\":2.3333333333333335,\"lr\":0}"));
  EXPECT_EQ(lines[1], absl::StrCat("{\"trial_id\":", t, ",\"step\":1,\"val_loss\":null,\"lr\":0.00014285714285714287}"));

  // The trials table: strings, timestamps, booleans and absent values.
  ASSERT_NO_FATAL_FAILURE(Finish(0));
  r = Cli({"export", Id(), "--table", "trials", "--format", "jsonl", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string text = ReadFile(out);
  const std::vector<std::string> trials = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_THAT(text, HasSubstr("\"placement\":\"post\""));
  EXPECT_THAT(text, HasSubstr("\"state\":\"TRIAL_SUCCEEDED\""));
  EXPECT_TRUE(std::regex_search(text, std::regex("\"finished_at\":\"20\\d\\d-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z\"")))
      << text;
  EXPECT_THAT(text, HasSubstr("\"finished_at\":null"));  // the running trial
  EXPECT_THAT(text, HasSubstr("\"final_val_loss\":2.5"));
}

// grad_norms in the stored shape (issue 37): a row per (trial, step, layer,
// matrix), the matrix by its stored name, each norm read back exactly; and
// the trials table's peak lr as peak_lr, with the deprecated lr beside it.
TEST_F(ExportCliTest, GradNormsAreLongAndTheTrialsPeakLrIsPeakLr) {
  // Each row written: its key columns as text, and its norm.
  std::vector<std::pair<std::string, double>> expected;
  for (int i = 0; i < 2; ++i) {
    v1::ReportProgressRequest progress = testing::ProgressOf(worker_, leased_[i]);
    testing::AddPoint(progress, 0)->set_val_loss(5.5);
    for (int step : {0, 10}) {
      v1::LayerGradNorms* g = progress.add_layer_grad_norms();
      g->set_step(step);
      for (int layer : {0, 1}) {
        for (const std::string matrix : {"ffn.fc1", "ffn.fc2"}) {
          const double norm = (1.0 + i) / 3 + step + 0.1 * layer + (matrix == "ffn.fc2" ? 0.01 : 0);
          testing::AddNorm(g, layer, matrix, norm);
          expected.emplace_back(absl::StrCat(leased_[i].id(), ",", step, ",", layer, ",", matrix, ","), norm);
        }
      }
    }
    ASSERT_TRUE(store_->ReportProgress(progress, absl::Now()).ok());
  }
  const std::string out = dir_ + "/g.csv";
  CommandResult r = Cli({"export", Id(), "--table", "grad_norms", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> lines = absl::StrSplit(ReadFile(out), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1 + expected.size()) << ReadFile(out);
  EXPECT_EQ(lines[0], "trial_id,step,layer,matrix,norm");
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [key, norm] = expected[i];
    const std::string& line = lines[i + 1];
    ASSERT_EQ(line.substr(0, key.size()), key) << "row " << i;
    EXPECT_EQ(std::strtod(line.substr(key.size()).c_str(), nullptr), norm) << line;  // the double written
  }

  r = Cli({"export", Id(), "--table", "trials", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> trials = absl::StrSplit(ReadFile(out), '\n', absl::SkipEmpty());
  ASSERT_EQ(trials.size(), 3u);
  const std::vector<std::string> header = absl::StrSplit(trials[0], ',');
  const auto peak_lr = std::find(header.begin(), header.end(), "peak_lr");
  ASSERT_NE(peak_lr, header.end()) << trials[0];
  EXPECT_EQ(header.back(), "lr");  // deprecated, last so that the other columns keep their places
  const std::vector<std::string> row = absl::StrSplit(trials[1], ',');
  ASSERT_EQ(row.size(), header.size());
  EXPECT_EQ(row[peak_lr - header.begin()], "0.001");
  EXPECT_EQ(row.back(), "0.001");
}

TEST_F(ExportCliTest, FollowEndsWithTheSweepWithEveryRowOnce) {
  ASSERT_NO_FATAL_FAILURE(Report(0, 0, 10));
  const std::string out = dir_ + "/follow.csv";
  auto follower = testing::Subprocess::Start(
      {bin_ + "/client/normsweep", "export", Id(), "--table", "metrics", "--follow", "--out", out},
      {{"NORMSWEEP_SCHEDULER", scheduler_->address()}}, dir_ + "/follow.log");
  ASSERT_TRUE(follower.ok()) << follower.status();
  // Rows while it follows; the sweep ends when both trials have finished.
  ASSERT_TRUE(testing::WaitForFile(out, 30).ok());
  ASSERT_NO_FATAL_FAILURE(Report(1, 0, 15));
  ASSERT_NO_FATAL_FAILURE(Report(0, 10, 20));
  ASSERT_NO_FATAL_FAILURE(Finish(0));
  ASSERT_NO_FATAL_FAILURE(Report(1, 15, 30));
  ASSERT_NO_FATAL_FAILURE(Finish(1));
  ASSERT_EQ(follower->Wait(60), 0) << ReadFile(dir_ + "/follow.log");
  EXPECT_THAT(ReadFile(dir_ + "/follow.log"), HasSubstr("cursor: "));
  ExpectWritten(ReadCsv(out), AllKeys());
}

TEST_F(ExportCliTest, BadInputGetsAClearMessage) {
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string message;
  };
  const std::string id = Id();
  const std::vector<Case> cases = {
      {{"export", id}, 2, "--table is required"},
      {{"export", id, "--table", "losses"}, 2, "table: unknown table 'losses'"},
      {{"export", id, "--table", "metrics", "--metrics", "lr,nope"}, 2, "metrics[1]: unknown metric 'nope'"},
      {{"export", id, "--table", "metrics", "--metrics", "lr,,val_loss"}, 2, "--metrics: an empty name"},
      {{"export", id, "--table", "trials", "--metrics", "lr"}, 2, "--metrics: only with --table metrics"},
      {{"export", id, "--table", "trials", "--format", "xml"}, 2, "--format: expected csv or jsonl, got 'xml'"},
      {{"export", id, "--table", "trials", "--format", "jsonl", "--no-header"}, 2, "--no-header: only with"},
      {{"export", id, "--table", "trials", "--since", "garbage"}, 2, "since: "},
      {{"export", "x", "--table", "trials"}, 2, "not an id: 'x'"},
      {{"export", std::to_string(sweep_id_ + 100), "--table", "trials"}, 1, "no such sweep"},
      {{"export", id, "--table", "trials", "--out", dir_ + "/no/such/dir/x.csv"}, 1, "--out: cannot write"},
  };
  for (const Case& c : cases) {
    const CommandResult r = Cli(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << absl::StrJoin(c.args, " ") << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << absl::StrJoin(c.args, " ");
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("cursor:"))) << absl::StrJoin(c.args, " ");
  }
}

}  // namespace
}  // namespace normsweep
