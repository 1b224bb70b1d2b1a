// Issue 24's schemes in one sweep end to end: the five placements (Peri-LN
// asked for by its alias, sandwich) crossed with qk_norm false/true, ten
// schemes, through a throwaway PostgreSQL, the real normsweep-scheduler, two
// normsweep-worker processes running the real normsweep-train on a tiny
// model, and the normsweep CLI: every trial finishes with its metrics
// stored, the views have a row per scheme, and `show`, `trial`, `results`
// and `report` show every one of them.
#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/report/svg.h"
#include "client/sweep_client.h"
#include "db/pg_connection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/fresh_database.h"
#include "tests/common/read_file.h"
#include "tests/common/text_checks.h"
#include "tests/e2e/stack_test.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::Count;

const std::vector<std::string> kPlacements = {"post", "pre", "peri", "deepnorm", "mix"};
const std::vector<std::string> kVariants = {"qk_norm=false", "qk_norm=true"};

class NormSchemesEndToEndTest : public testing::StackTest {
 protected:
  // The (placement, variant) pairs of a view's rows for the sweep, and how
  // many rows it has.
  std::pair<std::set<std::pair<std::string, std::string>>, int> ViewRows(db::PgConnection& sql,
                                                                           const std::string& view, int64_t sweep) {
    std::set<std::pair<std::string, std::string>> pairs;
    auto r = sql.Exec(absl::StrCat("SELECT placement, variant FROM ", view, " WHERE sweep_id = $1"),
                      db::PgParams().Add(sweep));
    EXPECT_TRUE(r.ok()) << view << ": " << r.status();
    if (!r.ok()) return {pairs, 0};
    for (int i = 0; i < r->rows(); ++i) pairs.insert({r->GetString(i, 0), r->GetString(i, 1)});
    return {pairs, r->rows()};
  }
};

TEST_F(NormSchemesEndToEndTest, FivePlacementsTimesQkNormRunAndEverySchemeIsShown) {
  for (const char* name : {"w1", "w2"}) ASSERT_NE(StartWorker(name, scheduler_->address()), nullptr);
  ASSERT_TRUE(WaitForLiveWorkers({"w1", "w2"}, 60));
  // 10 schemes x 2 lrs, one warm-up, one seed: 20 trials of 20 steps.
  const std::string path = dir_ + "/schemes.yaml";
  std::ofstream(path) << "name: norm-schemes\nplacements: [post, pre, sandwich, deepnorm, mix]\n"
                         "warmup_steps: [0]\npeak_lrs: [1e-3, 1e-2]\nseeds: [0]\n"
                         "extra_axes:\n  - field: qk_norm\n    values: [\"false\", \"true\"]\n"
                         "base: {layers: 1, d_model: 16, heads: 2, seq_len: 16, batch_size: 4, steps: 20,"
                         " eval_every: 10, eval_batches: 2}\n";
  CommandResult submitted = Cli({"submit", path});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  int64_t id = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(submitted.output), &id)) << submitted.output;
  CommandResult watch = Cli({"watch", absl::StrCat(id)}, 300);
  ASSERT_EQ(watch.exit_code, 0) << watch.output;
  EXPECT_THAT(watch.output, HasSubstr("20/20 done"));

  // The stored spec says peri, as its trials do.
  auto sweep = client_->GetSweep(id);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->state(), v1::SWEEP_COMPLETED);
  EXPECT_EQ(std::vector<std::string>(sweep->spec().placements().begin(), sweep->spec().placements().end()),
            kPlacements);

  // Every trial finished (diverging is a result too) with its settings and
  // its metrics stored.
  auto trials = client_->ListTrials(id);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 20u);
  std::set<std::tuple<std::string, std::string, double>> points;
  std::map<std::string, int64_t> a_trial;  // "placement variant" -> a trial id
  for (const v1::Trial& t : *trials) {
    EXPECT_TRUE(t.state() == v1::TRIAL_SUCCEEDED || t.state() == v1::TRIAL_DIVERGED) << t.ShortDebugString();
    EXPECT_TRUE(t.result().has_init_val_loss()) << "trial " << t.id();
    EXPECT_EQ(t.config().qk_norm(), t.variant() == "qk_norm=true") << t.ShortDebugString();
    EXPECT_EQ(t.config().has_mix_post_fraction(), t.config().placement() == "mix") << t.ShortDebugString();
    points.insert({t.config().placement(), t.variant(), t.config().lr()});
    a_trial[absl::StrCat(t.config().placement(), " ", t.variant())] = t.id();
  }
  EXPECT_EQ(points.size(), 20u);
  EXPECT_EQ(a_trial.size(), 10u);

  auto conn = testing::Connect(conninfo_);
  ASSERT_TRUE(conn.ok()) << conn.status();
  db::PgConnection& sql = **conn;
  auto metrics = sql.Exec(
      "SELECT count(*), count(*) FILTER (WHERE n > 0) FROM (SELECT t.id, count(m.step) AS n FROM trials t"
      " LEFT JOIN trial_metrics m ON m.trial_id = t.id WHERE t.sweep_id = $1 GROUP BY t.id) x",
      db::PgParams().Add(id));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->GetInt64(0, 0), 20);
  EXPECT_EQ(metrics->GetInt64(0, 1), 20) << "trials without metric rows";

  // The views: a row per placement x variant (lr_sensitivity: per line, and
  // each scheme has one warm-up).
  std::set<std::pair<std::string, std::string>> schemes;
  for (const std::string& p : kPlacements) {
    for (const std::string& v : kVariants) schemes.insert({p, v});
  }
  for (const char* view : {"placement_sensitivity", "lr_sensitivity"}) {
    const auto [pairs, rows] = ViewRows(sql, view, id);
    EXPECT_EQ(pairs, schemes) << view;
    EXPECT_EQ(rows, 10) << view;
  }

  // normsweep results: a grid per scheme, in the placements' order; CSV a row per cell.
  CommandResult results = Cli({"results", absl::StrCat(id)});
  ASSERT_EQ(results.exit_code, 0) << results.output;
  size_t last = 0;
  for (const std::string& p : kPlacements) {
    for (const std::string& v : kVariants) {
      const std::string title = absl::StrCat("\n", client::PlacementTitle(p), " [", v, "]\n");
      const size_t at = results.output.find(title);
      ASSERT_NE(at, std::string::npos) << title << " in\n" << results.output;
      EXPECT_GT(at, last) << title;
      last = at;
    }
  }
  CommandResult csv = Cli({"results", absl::StrCat(id), "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.output;
  const std::vector<std::string> lines = absl::StrSplit(csv.output, '\n', absl::SkipEmpty());
  EXPECT_EQ(lines.size(), 1u + 20u) << csv.output;
  EXPECT_THAT(csv.output, HasSubstr("\ndeepnorm,qk_norm=true,0,0.01,1,"));

  // normsweep show and trial say each trial's scheme.
  CommandResult show = Cli({"show", absl::StrCat(id)});
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_THAT(show.output, HasSubstr(" deepnorm 0        1e-02     0     qk_norm=true "));
  CommandResult trial = Cli({"trial", absl::StrCat(a_trial.at("mix qk_norm=true"))});
  ASSERT_EQ(trial.exit_code, 0) << trial.output;
  EXPECT_THAT(trial.output, HasSubstr(", placement mix, mix_post_fraction 0.25, qk_norm, warmup 0, "));
  trial = Cli({"trial", absl::StrCat(a_trial.at("peri qk_norm=false"))});
  ASSERT_EQ(trial.exit_code, 0) << trial.output;
  EXPECT_THAT(trial.output, HasSubstr(", placement peri, warmup 0, "));

  // The report: a heatmap, a loss-against-lr and a curves panel per scheme,
  // and each variant's LR-sensitivity chart a line per placement in its colour.
  const std::string out = dir_ + "/report";
  CommandResult report = Cli({"report", absl::StrCat(id), "--out", out});
  ASSERT_EQ(report.exit_code, 0) << report.output;
  const std::string html = testing::ReadFile(out + "/index.html");
  for (const std::string& p : kPlacements) {
    const std::string title = client::PlacementTitle(p);
    EXPECT_EQ(Count(html, absl::StrCat("aria-label=\"", title, ": final validation loss heatmap\"")), 2u) << p;
    EXPECT_EQ(Count(html, absl::StrCat("aria-label=\"", title, ": final validation loss against peak lr\"")), 2u)
        << p;
    EXPECT_EQ(Count(html, absl::StrCat("aria-label=\"", title, ": validation loss curves\"")), 2u) << p;
    EXPECT_EQ(Count(html, absl::StrCat("<polyline class=\"curve lrs-line\" fill=\"none\" stroke=\"",
                                       client::PlacementColour(p), "\"")),
              2u)
        << p;
  }
  for (const std::string& v : kVariants) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<h2>Final validation loss over warm-up \u00d7 peak lr \u2014 ", v)));
  }
}

}  // namespace
}  // namespace normsweep
