#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/results.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "tests/common/views_fixture.h"
#include "tests/common/text_checks.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::HasSubstrs;

v1::Trial MakeTrial(const std::string& placement, int warmup, double lr, int seed, v1::TrialState state,
                    double loss = 0) {
  v1::Trial t;
  t.mutable_config()->set_placement(placement);
  t.mutable_config()->set_warmup_steps(warmup);
  t.mutable_config()->set_lr(lr);
  t.mutable_config()->set_seed(seed);
  t.set_state(state);
  if (state == v1::TRIAL_SUCCEEDED) t.mutable_result()->set_final_val_loss(loss);
  return t;
}

// A trial whose l0 (the loss at initialisation) is known.
v1::Trial WithL0(v1::Trial t, double l0) {
  t.mutable_result()->set_init_val_loss(l0);
  return t;
}

// The whitespace-separated words of each line of text.
std::vector<std::vector<std::string>> Words(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    out.push_back(absl::StrSplit(line, ' ', absl::SkipEmpty()));
  }
  return out;
}

bool HasRow(const std::string& text, const std::vector<std::string>& words) {
  for (const auto& w : Words(text)) {
    if (w == words) return true;
  }
  return false;
}

// The fields of one CSV line (RFC 4180: a quoted field may hold commas, and
// "" stands for a quote).
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// The CSV's header, then each row by column name; fails the test when a
// row's fields do not match the header.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};
Csv ParseCsv(const std::string& text) {
  Csv csv;
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty()) return csv;
  csv.header = CsvFields(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> fields = CsvFields(lines[i]);
    EXPECT_EQ(fields.size(), csv.header.size()) << lines[i];
    std::map<std::string, std::string>& row = csv.rows.emplace_back();
    for (size_t f = 0; f < fields.size() && f < csv.header.size(); ++f) row[csv.header[f]] = fields[f];
  }
  return csv;
}

// A CSV field read back as a double (strtod, as a reader would), NaN when
// it is not a whole number.
double Number(const std::string& field) {
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  return !field.empty() && end == field.c_str() + field.size() ? v : std::nan("");
}

// The JSON parsed back (protobuf's JSON parser into a Struct); an empty one
// after failing the test.
google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct out;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &out);
  EXPECT_TRUE(status.ok()) << status << "\n" << json;
  return out;
}

// json[key][i] as an object.
const google::protobuf::Struct& Item(const google::protobuf::Struct& json, const std::string& key, int i) {
  return json.fields().at(key).list_value().values(i).struct_value();
}
bool IsNull(const google::protobuf::Struct& o, const std::string& key) {
  return o.fields().at(key).kind_case() == google::protobuf::Value::kNullValue;
}

TEST(ResultsTest, MeanOverSeedsAndDivergenceCounts) {
  std::vector<v1::Trial> trials = {
      MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0), MakeTrial("post", 0, 1e-3, 1, v1::TRIAL_SUCCEEDED, 2.2),
      MakeTrial("post", 0, 1e-2, 0, v1::TRIAL_DIVERGED),       MakeTrial("post", 0, 1e-2, 1, v1::TRIAL_DIVERGED),
      MakeTrial("pre", 0, 1e-2, 0, v1::TRIAL_SUCCEEDED, 1.9),  MakeTrial("pre", 0, 1e-2, 1, v1::TRIAL_DIVERGED),
      MakeTrial("pre", 100, 1e-2, 0, v1::TRIAL_RUNNING)};
  // The figures come from the views (warmup_lr_grid_stats), as the CLI gets them.
  auto analysis = testing::AnalysisFromViews(trials);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  std::vector<ResultCell> cells = CellsFromAnalysis(*analysis);
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[0].placement, "post");
  EXPECT_DOUBLE_EQ(cells[0].peak_lr, 1e-3);
  EXPECT_NEAR(cells[0].mean_final_val_loss, 2.1, 1e-12);
  EXPECT_NEAR(cells[0].std_final_val_loss, 0.141421356, 1e-6);
  EXPECT_EQ(cells[1].diverged, 2);
  EXPECT_EQ(cells[1].seeds_with_loss, 0);
  EXPECT_EQ(cells[2].diverged, 1);
  EXPECT_EQ(cells[3].unfinished, 1);

  v1::Sweep sweep;
  sweep.set_id(7);
  sweep.set_name("s");
  const std::string table = RenderResultsTable(sweep, *analysis);
  EXPECT_THAT(table, HasSubstrs({"Post-LN", "Pre-LN", "2.100±0.141", "diverged", "1.900 (1 div)", "1e-02"}));

  const std::string csv = RenderResultsCsv(*analysis);
  // plateaued 0, divergence_rate 0, then failure_rate 0 and the mean.
  EXPECT_THAT(csv, HasSubstr("post,\"\",0,0.001,2,2,0,0,0,0,0,0,0,2.1,"));
  const Csv parsed = ParseCsv(csv);
  ASSERT_EQ(parsed.rows.size(), 4u) << csv;
  EXPECT_EQ(parsed.rows[0].at("mean_val_loss"), "2.1");
  EXPECT_NEAR(Number(parsed.rows[0].at("std_val_loss")), 0.141421356, 1e-6);
  EXPECT_EQ(parsed.rows[0].at("min_val_loss"), "2");
  EXPECT_EQ(parsed.rows[1].at("mean_val_loss"), "");  // every seed diverged
  const std::string json = RenderResultsJson(sweep, *analysis);
  EXPECT_THAT(json, HasSubstrs({"\"mean_val_loss\":null", "\"mean_final_val_loss\":null"}));
}

// Post-LN, l0 6.0 everywhere (the views compute; the numbers by hand):
//   warm-up 0:   1e-3: 3.0, 3.5 (l 3.25)   1e-2: 2.5, DIVERGED = 6.0 (l 4.25)
//                l* 3.25 at 1e-3, LRS (0 + 1.0) / 2 = 0.5, one point at l0
//   warm-up 100: 1e-3: 3.0, 3.0 (l 3.0)    1e-2: 2.5, 2.5 (l 2.5)
//                l* 2.5 at 1e-2, LRS (0.5 + 0) / 2 = 0.25
//   summary: 2 warm-ups, mean 0.375, min 0.25 at 100, max 0.5, best l* 2.5
//   ANOVA: f = [[3.25, 4.25], [3.0, 2.5]], mu 3.25; a = +-0.5: var 0.25;
//   b = -+0.125: var 0.015625; residuals +-0.375: var 0.140625; seed
//   variances 0.0625, 3.0625, 0, 0: var 0.78125; total 1.1875; shares
//   21.1%, 1.3%, 11.8%, 65.8% (0.210526, 0.013158, 0.118421, 0.657895).
// Pre-LN, one cell (warm-up 0, lr 1e-3: 2.0, 2.2): LRS 0 from one lr,
// marked; only the seeds vary.
std::vector<v1::Trial> LrSensitivityTrials() {
  return {WithL0(MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
          WithL0(MakeTrial("post", 0, 1e-3, 1, v1::TRIAL_SUCCEEDED, 3.5), 6.0),
          WithL0(MakeTrial("post", 0, 1e-2, 0, v1::TRIAL_SUCCEEDED, 2.5), 6.0),
          WithL0(MakeTrial("post", 0, 1e-2, 1, v1::TRIAL_DIVERGED), 6.0),
          WithL0(MakeTrial("post", 100, 1e-3, 0, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
          WithL0(MakeTrial("post", 100, 1e-3, 1, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
          WithL0(MakeTrial("post", 100, 1e-2, 0, v1::TRIAL_SUCCEEDED, 2.5), 6.0),
          WithL0(MakeTrial("post", 100, 1e-2, 1, v1::TRIAL_SUCCEEDED, 2.5), 6.0),
          WithL0(MakeTrial("pre", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0), 6.0),
          WithL0(MakeTrial("pre", 0, 1e-3, 1, v1::TRIAL_SUCCEEDED, 2.2), 6.0)};
}

TEST(ResultsTest, LrSensitivityAndVarianceSharesUnderEachGrid) {
  auto analysis = testing::AnalysisFromViews(LrSensitivityTrials());
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  v1::Sweep sweep;
  sweep.set_id(3);
  sweep.set_name("lrs");
  const std::string table = RenderResultsTable(sweep, *analysis);
  const size_t post = table.find("Post-LN"), pre = table.find("Pre-LN");
  ASSERT_NE(post, std::string::npos) << table;
  ASSERT_NE(pre, std::string::npos) << table;
  const std::string post_part = table.substr(post, pre - post), pre_part = table.substr(pre);
  // Under the grid: the LR-sensitivity table, its summary, the shares.
  EXPECT_LT(post_part.find("warmup \\ lr"), post_part.find("LR sensitivity by warm-up")) << table;
  EXPECT_TRUE(HasRow(post_part, {"warm-up", "lrs", "l0", "l*", "best", "lr", "LRS", "at", "l0", "pending"})) << table;
  EXPECT_TRUE(HasRow(post_part, {"0", "2", "6.000", "3.250", "1e-03", "0.500", "1", "0"})) << table;
  EXPECT_TRUE(HasRow(post_part, {"100", "2", "6.000", "2.500", "1e-02", "0.250", "0", "0"})) << table;
  EXPECT_THAT(post_part, HasSubstr("over 2 warm-ups (LRS from two lrs or more): mean 0.375, min 0.250 at warm-up 100,"
                                   " max 0.500; best l* 2.500"));
  EXPECT_THAT(post_part, HasSubstr("Variance explained (fANOVA): warm-up 21.1%, peak lr 1.3%, interaction 11.8%,"
                                   " seeds 65.8% (total variance 1.18"));
  // One lr: the 0 is marked, and no warm-up makes the summary.
  EXPECT_TRUE(HasRow(pre_part, {"0", "1", "6.000", "2.100", "1e-03", "0.000", "(one", "lr)", "0", "0"})) << table;
  EXPECT_THAT(pre_part, HasSubstrs({"over warm-ups: no warm-up with LRS from two lrs or more",
                                    "warm-up 0.0%, peak lr 0.0%, interaction 0.0%, seeds 100.0%",
                                    "; one cell: only the seeds vary"}));
  EXPECT_THAT(post_part, Not(HasSubstr("(one lr)")));

  // CSV: the line's figures, the summary and the shares on each cell's row.
  const std::string csv = RenderResultsCsv(*analysis);
  const Csv parsed = ParseCsv(csv);
  ASSERT_EQ(parsed.rows.size(), 5u) << csv;
  const std::map<std::string, std::string>& first = parsed.rows[0];
  // failure_rate is the view's: 0 with the rule.
  const std::vector<std::pair<std::string, std::string>> want = {
      {"placement", "post"}, {"variant", ""}, {"warmup_steps", "0"}, {"peak_lr", "0.001"}, {"trials", "2"},
      {"succeeded", "2"}, {"divergence_rate", "0"}, {"failure_rate", "0"}, {"mean_val_loss", "3.25"},
      {"min_val_loss", "3"}, {"line_lrs", "2"}, {"line_init_val_loss", "6"}, {"line_best_val_loss", "3.25"},
      {"line_best_lr", "0.001"}, {"line_lr_sensitivity", "0.5"}, {"line_points_at_l0", "1"},
      {"line_lrs_pending", "0"}, {"summary_warmups", "2"}, {"summary_mean_lr_sensitivity", "0.375"},
      {"summary_min_lr_sensitivity", "0.25"}, {"summary_max_lr_sensitivity", "0.5"},
      {"summary_warmup_of_min", "100"}, {"summary_best_val_loss", "2.5"}, {"importance_note", ""},
      {"not_converged", "0"}, {"n_seeds", "2"}};
  for (const auto& [column, value] : want) EXPECT_EQ(first.at(column), value) << column;
  EXPECT_NEAR(Number(first.at("std_val_loss")), 0.353553, 1e-6);
  EXPECT_NEAR(Number(first.at("share_warmup")), 0.210526, 1e-6);
  EXPECT_NEAR(Number(first.at("share_lr")), 0.013158, 1e-6);
  EXPECT_NEAR(Number(first.at("share_interaction")), 0.118421, 1e-6);
  EXPECT_NEAR(Number(first.at("share_seed")), 0.657895, 1e-6);
  const std::map<std::string, std::string>& pre_cell = parsed.rows[4];
  for (const auto& [column, value] : std::vector<std::pair<std::string, std::string>>{
           {"line_lrs", "1"}, {"line_init_val_loss", "6"}, {"line_best_val_loss", "2.1"}, {"line_best_lr", "0.001"},
           {"line_lr_sensitivity", "0"}, {"summary_warmups", "0"}, {"summary_mean_lr_sensitivity", ""},
           {"summary_warmup_of_min", ""}, {"share_seed", "1"}, {"importance_note", "one cell: only the seeds vary"}}) {
    EXPECT_EQ(pre_cell.at(column), value) << column;
  }

  const std::string json = RenderResultsJson(sweep, *analysis);
  EXPECT_THAT(json, HasSubstrs({"{\"placement\":\"post\",\"variant\":\"\",\"warmup_steps\":0,\"lrs\":2,"
                                "\"init_val_loss\":6,\"best_val_loss\":3.25,\"best_lr\":0.001,"
                                "\"lr_sensitivity\":0.5,\"points_at_l0\":1,\"lrs_pending\":0,\"one_lr\":false}",
                                "\"one_lr\":true",
                                "{\"placement\":\"post\",\"variant\":\"\",\"warmups\":2,"
                                "\"mean_lr_sensitivity\":0.375,\"min_lr_sensitivity\":0.25,"
                                "\"max_lr_sensitivity\":0.5,\"warmup_of_min\":100,\"best_val_loss\":2.5}"}));
  const google::protobuf::Struct parsed_json = ParseJson(json);
  const google::protobuf::Struct& shares = Item(parsed_json, "importance", 0);
  EXPECT_EQ(shares.fields().at("placement").string_value(), "post");
  EXPECT_NEAR(shares.fields().at("share_warmup").number_value(), 0.210526, 1e-6);
  EXPECT_NEAR(shares.fields().at("share_seed").number_value(), 0.657895, 1e-6);
  EXPECT_EQ(shares.fields().at("note").string_value(), "");
}

// Without l0 (trials of a trainer that sent none) nothing counts yet; a
// random search has no grid for the shares, and says so.
TEST(ResultsTest, PendingLinesAndRandomSearchNote) {
  testing::ViewsFixtureOptions options;
  options.spec.mutable_random_search()->set_samples(2);
  options.spec.mutable_random_search()->set_lr_min(1e-4);
  options.spec.mutable_random_search()->set_lr_max(1e-2);
  auto analysis = testing::AnalysisFromViews(
      {MakeTrial("pre", 10, 2e-4, 0, v1::TRIAL_SUCCEEDED, 3.0), MakeTrial("pre", 10, 5e-3, 0, v1::TRIAL_DIVERGED)},
      options);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  v1::Sweep sweep;
  const std::string table = RenderResultsTable(sweep, *analysis);
  EXPECT_TRUE(HasRow(table, {"10", "0", "-", "-", "-", "-", "0", "2"})) << table;
  EXPECT_THAT(table, HasSubstr("Variance explained (fANOVA): not computed: random search: no grid; fANOVA needs a "
                               "surrogate model (Optuna's fANOVA fits a random forest) - not computed"));
  EXPECT_THAT(RenderResultsJson(sweep, *analysis), HasSubstr("\"lr_sensitivity\":null"));
}

// The failure rule's columns (proto/schema/failure.h) from hand-made rows,
// as a scheduler with the rule returns them: Post-LN without warm-up, one
// seed at the plateau at 1e-3, both diverged at 1e-2; with warm-up both
// trained at 1e-3, one still running at 1e-2.
v1::GetSweepAnalysisResponse FailureAnalysis() {
  v1::GetSweepAnalysisResponse a;
  auto cell = [&](int warmup, double lr, int trials, int succeeded, int diverged, int plateaued, int unfinished,
                  std::optional<double> mean) {
    v1::GridCell& c = *a.add_cells();
    c.set_placement("post");
    c.set_warmup_steps(warmup);
    c.set_peak_lr(lr);
    c.set_trials(trials);
    c.set_succeeded(succeeded);
    c.set_diverged(diverged);
    c.set_plateaued(plateaued);
    c.set_unfinished(unfinished);
    c.set_n_seeds(succeeded);
    if (mean) c.set_mean_val_loss(*mean);
    if (succeeded + diverged > 0) {
      c.set_divergence_rate(static_cast<double>(diverged) / (succeeded + diverged));
      c.set_failure_rate(static_cast<double>(diverged + plateaued) / (succeeded + diverged));
    }
  };
  cell(0, 1e-3, 2, 2, 0, 1, 0, 2.9);
  cell(0, 1e-2, 2, 0, 2, 0, 0, std::nullopt);
  cell(100, 1e-3, 2, 2, 0, 0, 0, 2.5);
  cell(100, 1e-2, 2, 1, 0, 0, 1, 2.4);
  return a;
}

TEST(ResultsTest, PlateauedAndFailureRateColumns) {
  v1::GetSweepAnalysisResponse a = FailureAnalysis();
  // (100, 1e-2): its one succeeded seed ended near the unigram loss still learning.
  a.mutable_cells(3)->set_not_converged(1);
  const std::vector<ResultCell> cells = CellsFromAnalysis(a);
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[3].not_converged, 1);
  EXPECT_EQ(cells[0].plateaued, 1);
  EXPECT_EQ(cells[0].failure_rate, 0.5);
  EXPECT_EQ(cells[0].divergence_rate, 0.0);
  EXPECT_EQ(cells[3].failure_rate, 0.0);

  v1::Sweep sweep;
  sweep.set_id(9);
  sweep.set_name("f");
  const std::string table = RenderResultsTable(sweep, a);
  EXPECT_THAT(table, HasSubstr("(k plat): k seeds failed to train without diverging"));
  EXPECT_TRUE(HasRow(table, {"0", "2.900±0.000", "(1", "plat)", "diverged"})) << table;
  EXPECT_THAT(table, HasSubstr("(k n.c.): k seeds ended near the unigram loss still learning"));
  EXPECT_TRUE(HasRow(table, {"100", "2.500±0.000", "2.400", "(1", "n.c.)", "..."})) << table;
  // Under the loss grid, the failure rates.
  const size_t rates = table.find("failed to train, (diverged + plateaued) / finished seeds:\n");
  ASSERT_NE(rates, std::string::npos) << table;
  const std::string below = table.substr(rates);
  EXPECT_TRUE(HasRow(below, {"0", "50%", "(1/2)", "100%", "(2/2)"})) << table;
  EXPECT_TRUE(HasRow(below, {"100", "0%", "(0/2)", "0%", "(0/1)"})) << table;

  const std::string csv = RenderResultsCsv(a);
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << csv;
  EXPECT_THAT(lines[0], HasSubstr("trials,succeeded,diverged,plateaued,failed,cancelled,unfinished,divergence_rate,"
                                  "failure_rate,mean_val_loss,"));
  EXPECT_THAT(lines[1], HasSubstr("post,\"\",0,0.001,2,2,0,1,0,0,0,0,0.5,2.9,"));
  EXPECT_THAT(lines[2], HasSubstr("post,\"\",0,0.01,2,0,2,0,0,0,0,1,1,,"));
  const Csv parsed = ParseCsv(csv);
  ASSERT_EQ(parsed.rows.size(), 4u);
  EXPECT_EQ(parsed.rows[2].at("not_converged"), "0");
  EXPECT_EQ(parsed.rows[3].at("not_converged"), "1");

  const std::string json = RenderResultsJson(sweep, a);
  EXPECT_THAT(json, HasSubstrs({
      "\"diverged\":0,\"plateaued\":1,\"failed\":0,\"cancelled\":0,"
                              "\"unfinished\":0,\"divergence_rate\":0,\"failure_rate\":0.5,",
      "\"diverged\":2,\"plateaued\":0,\"failed\":0,\"cancelled\":0,"
                              "\"unfinished\":0,\"divergence_rate\":1,\"failure_rate\":1,",
  }));
  const google::protobuf::Struct parsed_json = ParseJson(json);
  EXPECT_EQ(Item(parsed_json, "cells", 0).fields().at("not_converged").number_value(), 0);
  EXPECT_EQ(Item(parsed_json, "cells", 3).fields().at("not_converged").number_value(), 1);

  // A scheduler before the rule sends no rates: no second grid, nulls.
  v1::GetSweepAnalysisResponse old = a;
  for (v1::GridCell& c : *old.mutable_cells()) {
    c.clear_failure_rate();
    c.set_plateaued(0);
  }
  EXPECT_THAT(RenderResultsTable(sweep, old), Not(HasSubstr("failed to train, (diverged")));
  EXPECT_THAT(RenderResultsJson(sweep, old), HasSubstr("\"failure_rate\":null"));
}

// One seed has no spread: its std is absent (an empty CSV field, JSON null,
// no ± in the table), never 0; two seeds have one.
TEST(ResultsTest, OneSeedHasNoStd) {
  auto analysis = testing::AnalysisFromViews({MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.5),
                                              MakeTrial("post", 0, 1e-2, 0, v1::TRIAL_SUCCEEDED, 2.0),
                                              MakeTrial("post", 0, 1e-2, 1, v1::TRIAL_SUCCEEDED, 2.4)});
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  v1::Sweep sweep;
  EXPECT_TRUE(HasRow(RenderResultsTable(sweep, *analysis), {"0", "2.500", "2.200±0.283"}));

  const std::string csv = RenderResultsCsv(*analysis);
  const Csv parsed = ParseCsv(csv);
  ASSERT_EQ(parsed.rows.size(), 2u) << csv;
  EXPECT_EQ(parsed.rows[0].at("n_seeds"), "1");
  EXPECT_EQ(parsed.rows[0].at("mean_val_loss"), "2.5");
  EXPECT_EQ(parsed.rows[0].at("std_val_loss"), "");
  EXPECT_EQ(parsed.rows[0].at("std_final_val_loss"), "");  // the deprecated name too
  EXPECT_EQ(parsed.rows[1].at("n_seeds"), "2");
  EXPECT_NEAR(Number(parsed.rows[1].at("std_val_loss")), 0.282843, 1e-6);

  const google::protobuf::Struct json = ParseJson(RenderResultsJson(sweep, *analysis));
  const google::protobuf::Struct& one = Item(json, "cells", 0);
  EXPECT_TRUE(IsNull(one, "std_val_loss"));
  EXPECT_TRUE(IsNull(one, "std_final_val_loss"));
  EXPECT_EQ(one.fields().at("mean_val_loss").number_value(), 2.5);
  EXPECT_NEAR(Item(json, "cells", 1).fields().at("std_val_loss").number_value(), 0.282843, 1e-6);
}

// With one seed in every cell the seeds' share of variance is 0 by
// construction: "n/a" in the table, empty in CSV, null in JSON. By hand,
// f = [[3.0, 2.0], [2.8, 2.2]] (warm-up 0, 100 x lr 1e-3, 1e-2), mu 2.5:
// warm-up means 2.5, 2.5 (share 0); lr means 2.9, 2.1 (variance 0.16);
// interaction +-0.1 (0.01); total 0.17: lr 94.1%, interaction 5.9%.
TEST(ResultsTest, SeedsShareIsNotApplicableWithOneSeedPerCell) {
  auto analysis = testing::AnalysisFromViews({WithL0(MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
                                              WithL0(MakeTrial("post", 0, 1e-2, 0, v1::TRIAL_SUCCEEDED, 2.0), 6.0),
                                              WithL0(MakeTrial("post", 100, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.8), 6.0),
                                              WithL0(MakeTrial("post", 100, 1e-2, 0, v1::TRIAL_SUCCEEDED, 2.2), 6.0)});
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  ASSERT_EQ(analysis->importance_size(), 1);
  const v1::VarianceShares& shares = analysis->importance(0);
  EXPECT_FALSE(HasSeedShare(shares));
  v1::Sweep sweep;
  EXPECT_THAT(RenderResultsTable(sweep, *analysis),
              HasSubstr("Variance explained (fANOVA): warm-up 0.0%, peak lr 94.1%, interaction 5.9%, seeds n/a (one "
                        "seed per cell) (total variance 0.17, 4 trials)"));
  const Csv csv = ParseCsv(RenderResultsCsv(*analysis));
  ASSERT_EQ(csv.rows.size(), 4u);
  for (const auto& row : csv.rows) {
    EXPECT_EQ(row.at("share_seed"), "");
    EXPECT_NEAR(Number(row.at("share_lr")), 0.16 / 0.17, 1e-12);
  }
  const google::protobuf::Struct json = ParseJson(RenderResultsJson(sweep, *analysis));
  EXPECT_TRUE(IsNull(Item(json, "importance", 0), "share_seed"));
  EXPECT_NEAR(Item(json, "importance", 0).fields().at("share_interaction").number_value(), 0.01 / 0.17, 1e-12);

  // A second seed in one cell gives the seeds a share.
  v1::VarianceShares two = shares;
  two.set_trials(5);
  EXPECT_TRUE(HasSeedShare(two));
}

// CSV and JSON write each number as the shortest text that reads back to
// the same double (the export's writer, std::to_chars: fixed or scientific,
// whichever is shorter): 0.1 + 0.2 needs 17 digits, 1/3 16, 3e-4 one; none
// is cut to 6 digits nor padded.
TEST(ResultsTest, NumbersAreTheShortestTextThatReadsBackExactly) {
  const double sum = 0.1 + 0.2, third = 1.0 / 3, seventh = 1.0 / 7, tiny = 1e-300;
  v1::GetSweepAnalysisResponse a;
  v1::GridCell& c = *a.add_cells();
  c.set_placement("pre");
  c.set_warmup_steps(10);
  c.set_peak_lr(3e-4);
  c.set_trials(3);
  c.set_succeeded(3);
  c.set_n_seeds(3);
  c.set_mean_val_loss(sum);
  c.set_std_val_loss(third);
  c.set_min_val_loss(tiny);
  c.set_divergence_rate(0);
  c.set_failure_rate(seventh);
  v1::LrSensitivity& l = *a.add_lr_sensitivity();
  l.set_placement("pre");
  l.set_warmup_steps(10);
  l.set_lrs(1);
  l.set_best_lr(3e-4);
  l.set_best_val_loss(sum);

  const Csv csv = ParseCsv(RenderResultsCsv(a));
  ASSERT_EQ(csv.rows.size(), 1u);
  const std::map<std::string, std::string>& row = csv.rows[0];
  EXPECT_EQ(row.at("peak_lr"), "3e-04");
  EXPECT_EQ(row.at("mean_val_loss"), "0.30000000000000004");
  EXPECT_EQ(row.at("std_val_loss"), "0.3333333333333333");
  EXPECT_EQ(row.at("min_val_loss"), "1e-300");
  EXPECT_EQ(row.at("failure_rate"), "0.14285714285714285");
  EXPECT_EQ(row.at("line_best_lr"), "3e-04");
  for (const auto& [column, value] : std::vector<std::pair<std::string, double>>{
           {"peak_lr", 3e-4}, {"mean_val_loss", sum}, {"std_val_loss", third}, {"min_val_loss", tiny},
           {"failure_rate", seventh}, {"line_best_val_loss", sum}, {"mean_final_val_loss", sum}}) {
    EXPECT_EQ(Number(row.at(column)), value) << column;
  }

  const std::string text = RenderResultsJson(v1::Sweep(), a);
  EXPECT_THAT(text, HasSubstrs({"\"peak_lr\":3e-04,", "\"mean_val_loss\":0.30000000000000004,",
                                "\"failure_rate\":0.14285714285714285,"}));
  const google::protobuf::Struct json = ParseJson(text);
  const google::protobuf::Struct& cell = Item(json, "cells", 0);
  EXPECT_EQ(cell.fields().at("mean_val_loss").number_value(), sum);
  EXPECT_EQ(cell.fields().at("std_val_loss").number_value(), third);
  EXPECT_EQ(cell.fields().at("min_val_loss").number_value(), tiny);
  EXPECT_EQ(Item(json, "lr_sensitivity", 0).fields().at("best_val_loss").number_value(), sum);
}

// QK-norm off (first in the sweep: the baseline) and on, Post-LN, warm-up
// {0, 100} x lr {1e-3, 1e-2}, one seed, l0 6.0 (figures by hand as in
// tests/db/variant_comparison_test.cc):
//   off: LRS (1.5 + 0.2) / 2 = 0.85; l* 2.8 at warm-up 100, lr 1e-2; failed 1/4
//   on:  LRS (0.1 + 0.05) / 2 = 0.075; l* 2.5 at warm-up 100, lr 1e-3; failed 0
//        against off: LRS -0.775, l* -0.3, best lr x0.1, failed -25 points
std::vector<v1::Trial> QkNormTrials() {
  std::vector<v1::Trial> out;
  auto add = [&](const std::string& variant, int warmup, double lr, v1::TrialState state, double loss = 0) {
    v1::Trial t = WithL0(MakeTrial("post", warmup, lr, 0, state, loss), 6.0);
    t.set_variant(variant);
    t.mutable_config()->set_qk_norm(variant == "qk_norm=true");
    out.push_back(t);
  };
  add("qk_norm=false", 0, 1e-3, v1::TRIAL_SUCCEEDED, 3.0);
  add("qk_norm=false", 0, 1e-2, v1::TRIAL_DIVERGED);
  add("qk_norm=false", 100, 1e-3, v1::TRIAL_SUCCEEDED, 3.2);
  add("qk_norm=false", 100, 1e-2, v1::TRIAL_SUCCEEDED, 2.8);
  add("qk_norm=true", 0, 1e-3, v1::TRIAL_SUCCEEDED, 2.9);
  add("qk_norm=true", 0, 1e-2, v1::TRIAL_SUCCEEDED, 2.7);
  add("qk_norm=true", 100, 1e-3, v1::TRIAL_SUCCEEDED, 2.5);
  add("qk_norm=true", 100, 1e-2, v1::TRIAL_SUCCEEDED, 2.6);
  return out;
}

TEST(ResultsTest, VariantsComparedBesideTheBaseline) {
  auto analysis = testing::AnalysisFromViews(QkNormTrials());
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  v1::Sweep sweep;
  const std::string table = RenderResultsTable(sweep, *analysis);
  const size_t at = table.find("\nVariants compared");
  ASSERT_NE(at, std::string::npos) << table;
  const std::string section = table.substr(at);
  EXPECT_THAT(section, HasSubstr("\nPost-LN, baseline qk_norm=false\n"));
  EXPECT_TRUE(HasRow(section, {"variant", "trials", "LRS", "ΔLRS", "l*", "Δl*", "best", "lr", "×best", "lr",
                               "warm-up", "failed", "Δfailed"})) << section;
  EXPECT_TRUE(HasRow(section, {"qk_norm=false", "4", "0.850", "+0.000", "2.800", "+0.000", "1e-02", "×1", "100",
                               "25.0%", "+0.0", "pp"})) << section;
  EXPECT_TRUE(HasRow(section, {"qk_norm=true", "4", "0.075", "-0.775", "2.500", "-0.300", "1e-03", "×0.1", "100",
                               "0.0%", "-25.0", "pp"})) << section;
  EXPECT_THAT(section, Not(HasSubstr("max trainable lr")));  // not a boundary search
  // Each variant's grid stays above, in its own section.
  EXPECT_LT(table.find("Post-LN [qk_norm=true]"), at);

  const Csv csv = ParseCsv(RenderResultsCsv(*analysis));
  ASSERT_EQ(csv.rows.size(), 8u);
  const std::map<std::string, std::string>& on = csv.rows[7];
  ASSERT_EQ(on.at("variant"), "qk_norm=true");
  EXPECT_EQ(on.at("comparison_baseline_variant"), "qk_norm=false");
  EXPECT_EQ(on.at("comparison_trials"), "4");
  EXPECT_EQ(on.at("comparison_best_lr"), "0.001");
  EXPECT_EQ(on.at("comparison_best_warmup_steps"), "100");
  EXPECT_EQ(on.at("comparison_failure_rate"), "0");
  EXPECT_EQ(on.at("comparison_delta_failure_rate"), "-0.25");
  EXPECT_NEAR(Number(on.at("comparison_delta_mean_lr_sensitivity")), -0.775, 1e-12);
  EXPECT_NEAR(Number(on.at("comparison_delta_best_val_loss")), -0.3, 1e-12);
  EXPECT_NEAR(Number(on.at("comparison_best_lr_ratio")), 0.1, 1e-12);
  EXPECT_EQ(on.at("comparison_max_trainable_lr"), "");
  EXPECT_EQ(on.at("comparison_boundary_lines"), "0");
  EXPECT_EQ(csv.rows[0].at("comparison_delta_best_val_loss"), "0");  // the baseline's own row

  const google::protobuf::Struct json = ParseJson(RenderResultsJson(sweep, *analysis));
  ASSERT_EQ(json.fields().at("variants").list_value().values_size(), 2);
  const google::protobuf::Struct& base = Item(json, "variants", 0);
  EXPECT_EQ(base.fields().at("placement").string_value(), "post");
  EXPECT_EQ(base.fields().at("variant").string_value(), "qk_norm=false");
  EXPECT_NEAR(base.fields().at("mean_lr_sensitivity").number_value(), 0.85, 1e-12);
  EXPECT_EQ(base.fields().at("best_lr_ratio").number_value(), 1);
  const google::protobuf::Struct& with = Item(json, "variants", 1);
  EXPECT_EQ(with.fields().at("baseline_variant").string_value(), "qk_norm=false");
  EXPECT_NEAR(with.fields().at("delta_mean_lr_sensitivity").number_value(), -0.775, 1e-12);
  EXPECT_EQ(with.fields().at("delta_failure_rate").number_value(), -0.25);
  EXPECT_TRUE(IsNull(with, "max_trainable_lr"));
}

// One variant: nothing to compare, no section (the comparison across
// placements stays as it is).
TEST(ResultsTest, OneVariantHasNoComparisonSection) {
  auto analysis = testing::AnalysisFromViews(LrSensitivityTrials());
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->variants_size(), 2);  // one per placement, each its own baseline
  EXPECT_THAT(RenderResultsTable(v1::Sweep(), *analysis), Not(HasSubstr("Variants compared")));
}

// A boundary search adds the largest trainable lr, its ratio to the
// baseline's and the lines counted (rows as the view gives them).
TEST(ResultsTest, BoundarySearchComparesTheLargestTrainableLr) {
  v1::GetSweepAnalysisResponse a;
  auto add = [&](const std::string& variant, double max_lr, double ratio, int lines) {
    v1::VariantComparison& v = *a.add_variants();
    v.set_placement("pre");
    v.set_variant(variant);
    v.set_baseline_variant("qk_norm=false");
    v.set_trials(12);
    v.set_max_trainable_lr(max_lr);
    v.set_max_trainable_lr_ratio(ratio);
    v.set_boundary_lines(lines);
  };
  add("qk_norm=false", 4e-3, 1, 3);
  add("qk_norm=true", 5e-3, 1.25, 2);
  const std::string table = RenderResultsTable(v1::Sweep(), a);
  EXPECT_THAT(table, HasSubstr("max trainable lr: the median over the variant's lines that found one"));
  EXPECT_TRUE(HasRow(table, {"qk_norm=false", "12", "-", "-", "-", "-", "-", "-", "-", "-", "-", "4e-03", "×1", "3"}))
      << table;
  EXPECT_TRUE(HasRow(table, {"qk_norm=true", "12", "-", "-", "-", "-", "-", "-", "-", "-", "-", "5e-03", "×1.25",
                             "2"}))
      << table;
}

// The CSV's header: the views' names for the loss columns in the places
// the old names had (a reader by position reads the same values), the new
// columns after the old ones, and the old names, deprecated, last, holding
// the same values; JSON has both keys.
TEST(ResultsTest, CsvHeaderNamesAndTheDeprecatedOnes) {
  auto analysis = testing::AnalysisFromViews(LrSensitivityTrials());
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  const Csv csv = ParseCsv(RenderResultsCsv(*analysis));
  const std::vector<std::string> want = {
      "placement", "variant", "warmup_steps", "peak_lr", "trials", "succeeded", "diverged", "plateaued", "failed",
      "cancelled", "unfinished", "divergence_rate", "failure_rate", "mean_val_loss", "std_val_loss", "min_val_loss",
      "line_lrs", "line_init_val_loss", "line_best_val_loss", "line_best_lr", "line_lr_sensitivity",
      "line_points_at_l0", "line_lrs_pending", "summary_warmups", "summary_mean_lr_sensitivity",
      "summary_min_lr_sensitivity", "summary_max_lr_sensitivity", "summary_warmup_of_min", "summary_best_val_loss",
      "share_warmup", "share_lr", "share_interaction", "share_seed", "importance_note", "not_converged", "n_seeds",
      "comparison_baseline_variant", "comparison_trials", "comparison_mean_lr_sensitivity",
      "comparison_best_val_loss", "comparison_best_lr", "comparison_best_warmup_steps", "comparison_failure_rate",
      "comparison_max_trainable_lr", "comparison_boundary_lines", "comparison_delta_mean_lr_sensitivity",
      "comparison_delta_best_val_loss", "comparison_best_lr_ratio", "comparison_delta_failure_rate",
      "comparison_max_trainable_lr_ratio", "mean_final_val_loss", "std_final_val_loss", "best_final_val_loss"};
  EXPECT_EQ(csv.header, want);
  ASSERT_EQ(csv.rows.size(), 5u);
  for (const auto& row : csv.rows) {
    EXPECT_EQ(row.at("mean_final_val_loss"), row.at("mean_val_loss"));
    EXPECT_EQ(row.at("std_final_val_loss"), row.at("std_val_loss"));
    EXPECT_EQ(row.at("best_final_val_loss"), row.at("min_val_loss"));
  }
  const google::protobuf::Struct json = ParseJson(RenderResultsJson(v1::Sweep(), *analysis));
  const google::protobuf::Struct& cell = Item(json, "cells", 0);
  for (const auto& [now, before] : std::vector<std::pair<std::string, std::string>>{
           {"mean_val_loss", "mean_final_val_loss"}, {"std_val_loss", "std_final_val_loss"},
           {"min_val_loss", "best_final_val_loss"}}) {
    EXPECT_EQ(cell.fields().at(now).number_value(), cell.fields().at(before).number_value()) << now;
  }
  EXPECT_EQ(cell.fields().at("mean_val_loss").number_value(), 3.25);
}

TEST(ResultsTest, LearningRateFormatting) {
  EXPECT_EQ(FormatLr(1e-3), "1e-03");
  EXPECT_EQ(FormatLr(3e-4), "3e-04");
  EXPECT_EQ(FormatLr(1.5e-3), "0.0015");
}

}  // namespace
}  // namespace normsweep::client
