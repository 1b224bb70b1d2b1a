// normsweep results: honest statistics (no spread from one seed), exact
// numbers in CSV and JSON, the variants compared, and the CSV's names with
// the deprecated ones, from trials through the real views (PostgreSQL).
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
#include "tests/client/results_reading.h"
#include "tests/common/views_fixture.h"
#include "tests/common/text_checks.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::HasSubstrs;
using results_testing::MakeTrial;
using results_testing::WithL0;
using results_testing::HasRow;
using results_testing::Csv;
using results_testing::ParseCsv;
using results_testing::Number;
using results_testing::ParseJson;
using results_testing::Item;
using results_testing::IsNull;
using results_testing::LrSensitivityTrials;

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
