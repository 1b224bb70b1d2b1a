// A boundary_search sweep end to end (issue 17): a throwaway PostgreSQL, the
// real normsweep-scheduler, two normsweep-worker processes running the real
// normsweep-train on a tiny model, and the normsweep CLI. Each line must end
// decided, its trials be what the search's rule asks for given their
// outcomes, and `normsweep results` print the boundary.
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/sweep_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/schema/boundary_search.h"
#include "tests/e2e/stack_test.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;

class BoundaryEndToEndTest : public testing::StackTest {
 protected:
  // Two one-slot workers against this test's scheduler.
  void StartWorkers() {
    for (const char* name : {"w1", "w2"}) ASSERT_NE(StartWorker(name, scheduler_->address()), nullptr);
  }
};

TEST_F(BoundaryEndToEndTest, LinesReachTheirBoundaryAndResultsPrintIt) {
  ASSERT_NO_FATAL_FAILURE(StartWorkers());
  // A tiny model, 40 steps: the low end trains too slowly to get 0.5 nats
  // below l0, the middle trains, the top end diverges or stalls. Three
  // decades at resolution 2: 4 coarse trials and at most 2 bisections a line.
  const std::string path = dir_ + "/boundary.yaml";
  std::ofstream(path) << "name: boundary-e2e\nplacements: [post, pre]\nwarmup_steps: [0]\nseeds: [0]\n"
                         "boundary_search: {lr_min: 1e-3, lr_max: 1.0, resolution: 2}\n"
                         "base: {layers: 1, d_model: 16, heads: 2, seq_len: 16, batch_size: 4, steps: 40,"
                         " eval_every: 20, eval_batches: 2}\n";
  auto [code, out] = Cli({"submit", path});
  ASSERT_EQ(code, 0) << out;
  int64_t id = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(out), &id)) << out;

  // `normsweep watch` follows the sweep to its end, printing the lines as
  // their trials finish, then the results.
  auto [watch_code, watched] = Cli({"watch", absl::StrCat(id)}, 600);
  ASSERT_EQ(watch_code, 0) << watched;
  EXPECT_THAT(watched, HasSubstr("line  placement  variant  warmup  seed  state"));
  EXPECT_THAT(watched, HasSubstr("max trainable lr by warm-up"));

  auto sweep = client_->GetSweep(id);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->state(), v1::SWEEP_COMPLETED);
  auto trials = client_->ListTrials(id);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(sweep->trial_count(), static_cast<int>(trials->size()));
  EXPECT_GE(trials->size(), 8u);
  EXPECT_LE(trials->size(), 12u);
  auto analysis = client_->GetSweepAnalysis(id);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  ASSERT_EQ(analysis->boundary_size(), 2);

  // Each line's trials, judged by the search's own rule, say that the line
  // is done, in the state the view reports, and no lr was run twice.
  const schema::BoundarySettings settings = schema::BoundarySettingsOf(sweep->spec().boundary_search());
  std::map<int, std::vector<schema::Probe>> probes;
  std::map<int, std::set<double>> lrs;
  for (const v1::Trial& t : *trials) {
    ASSERT_TRUE(t.has_boundary_line()) << t.id();
    EXPECT_TRUE(t.result().has_init_val_loss()) << "trial " << t.id() << ": no l0 from the worker";
    EXPECT_TRUE(lrs[t.boundary_line()].insert(t.config().lr()).second) << "lr run twice in line " << t.boundary_line();
    const v1::TrialResult& r = t.result();
    probes[t.boundary_line()].push_back(
        {t.config().lr(), schema::ClassifyProbe(t.state(), r.has_final_val_loss() ? std::optional(r.final_val_loss()) : std::nullopt,
                                                r.has_init_val_loss() ? std::optional(r.init_val_loss()) : std::nullopt,
                                                r.has_unigram_loss() ? std::optional(r.unigram_loss()) : std::nullopt,
                                                r.has_val_loss_progress() ? std::optional(r.val_loss_progress())
                                                                          : std::nullopt,
                                                settings)});
  }
  for (const v1::BoundaryLine& line : analysis->boundary()) {
    const schema::LineDecision d = schema::DecideLine(settings, probes[line.line()]);
    EXPECT_FALSE(d.next_lr.has_value()) << "line " << line.line() << " stalled";
    EXPECT_EQ(schema::LineStateName(d.state), line.state()) << "line " << line.line();
    EXPECT_TRUE(line.state() == "FOUND" || line.state() == "TRAINABLE_EVERYWHERE" ||
                line.state() == "NOWHERE_TRAINABLE")
        << "line " << line.line() << ": " << line.state();
    EXPECT_EQ(line.trials(), static_cast<int>(probes[line.line()].size()));
    EXPECT_EQ(line.finished(), line.trials());
    if (line.state() == "FOUND") {
      EXPECT_LE(line.min_untrainable_lr() / line.max_trainable_lr(), 2.0 * (1 + 1e-12));
    }
    std::printf("line %d %s: %s [%g, %g) in %d trials\n", line.line(), line.placement().c_str(), line.state().c_str(),
                line.max_trainable_lr(), line.min_untrainable_lr(), line.trials());
  }

  auto [results_code, results] = Cli({"results", absl::StrCat(id)});
  ASSERT_EQ(results_code, 0) << results;
  EXPECT_THAT(results, HasSubstr("max trainable lr by warm-up"));
  EXPECT_THAT(results, HasSubstr("\nPost-LN\nwarmup  seeds  min"));
  EXPECT_THAT(results, HasSubstr("\nPre-LN\nwarmup  seeds  min"));
  EXPECT_THAT(results, HasSubstr("1/1"));
  if (const size_t at = results.find("max trainable lr by warm-up"); at != std::string::npos) {
    std::printf("%s", results.substr(at).c_str());
  }
}

// The shipped sweep file on the paper's model (deploy/sweeps/boundary.yaml),
// for its measured result in docs/paper.md (section 6): minutes of CPU, so run by
// hand: NORMSWEEP_CORPUS=FILE boundary_e2e_test --gtest_also_run_disabled_tests
// --gtest_filter='*PaperModel*' (the corpus as deploy/local/run.sh writes it).
TEST_F(BoundaryEndToEndTest, DISABLED_PaperModelBoundary) {
  const char* corpus = std::getenv("NORMSWEEP_CORPUS");
  if (corpus == nullptr) GTEST_SKIP() << "NORMSWEEP_CORPUS: the training text";
  ASSERT_NO_FATAL_FAILURE(StartWorkers());
  const absl::Time start = absl::Now();
  auto [code, out] = Cli({"submit", src_ + "/deploy/sweeps/boundary.yaml", "--set",
                          absl::StrCat("data_file=", corpus)});
  ASSERT_EQ(code, 0) << out;
  int64_t id = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(out), &id)) << out;
  auto [watch_code, watched] = Cli({"watch", absl::StrCat(id)}, 3600);
  ASSERT_EQ(watch_code, 0) << watched;
  auto trials = client_->ListTrials(id);
  ASSERT_TRUE(trials.ok()) << trials.status();
  std::printf("%zu trials in %.0f s\n", trials->size(), absl::ToDoubleSeconds(absl::Now() - start));
  for (const v1::Trial& t : *trials) {
    std::printf("line %d %s w%d lr %.3g %s final %.3f l0 %.3f\n", t.boundary_line(), t.config().placement().c_str(),
                t.config().warmup_steps(), t.config().lr(), v1::TrialState_Name(t.state()).c_str(),
                t.result().final_val_loss(), t.result().init_val_loss());
  }
  auto [results_code, results] = Cli({"results", absl::StrCat(id)});
  ASSERT_EQ(results_code, 0) << results;
  std::printf("%s", results.c_str());
}

}  // namespace
}  // namespace normsweep
