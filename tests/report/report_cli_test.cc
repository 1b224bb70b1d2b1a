// `normsweep report` as a user runs it: a throwaway PostgreSQL holding a
// finished sweep (written through the store as a worker would: leases,
// progress with metrics, l0, step-0 gradient norms and per-layer
// diagnostics, outcomes), a real normsweep-scheduler, the CLI over gRPC; then
// the page loaded in headless Chromium (client/report_screenshot.sh) and the
// screenshot checked, and the same for a page of hand-made figures
// (tests/report/report_fixture.h). Without Chromium the screenshot tests
// fail: CI installs it (deploy/install-deps.sh).
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/report/fetch.h"
#include "client/report/page.h"
#include "client/sweep_client.h"
#include "db/postgres_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/leased_sweep.h"
#include "tests/common/metric_points.h"
#include "tests/common/process_test.h"
#include "tests/common/read_file.h"
#include "tests/common/requests.h"
#include "tests/common/served_store_test.h"
#include "tests/common/subprocess.h"
#include "tests/report/png_image.h"
#include "tests/report/report_fixture.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;

// Every trial's loss at initialisation (l0).
constexpr double kL0 = 5.55;

using testing::CommandResult;
using testing::HasSubstrs;
using testing::ReadFile;

class ReportCliTest : public testing::ServedStoreTest {
 protected:
  ReportCliTest() { cli_timeout_s_ = 180; }

  // post/pre x warm-up {0, 100} x lr {1e-3, 1e-2} x seeds {0, 1}, 2 layers.
  // Post-LN without warm-up diverges at lr 1e-2; the other losses are
  // pre 2.0 + seed/10 (1.8 at lr 1e-2), post 2.6 + seed/10 (+0.3 without warm-up).
  // l0 is kL0 for all. Diagnostics at every validation step (0, 20, ...):
  // layer 1's attention logit is the larger, 2 + step/100, or 3 * 2^(step/8)
  // when the trial diverges; layer 1's fc2 moves the most.
  // Written through the store on this test's database, as a worker would.
  void WriteRows() override {
    db::Store& store = *store_;
    v1::SweepSpec spec;
    spec.set_name("report <e2e> & \"co\"");
    spec.set_max_attempts(1);
    std::vector<db::NewTrial> trials;
    for (const char* placement : {"post", "pre"}) {
      for (int warmup : {0, 100}) {
        for (double lr : {1e-3, 1e-2}) {
          for (int seed : {0, 1}) {
            db::NewTrial t;
            t.index = static_cast<int>(trials.size());
            t.config.set_placement(placement);
            t.config.set_warmup_steps(warmup);
            t.config.set_lr(lr);
            t.config.set_seed(seed);
            t.config.set_layers(2);
            t.config.set_steps(100);
            trials.push_back(t);
          }
        }
      }
    }
    const absl::Time now = absl::Now();
    auto sweep = testing::CreateLeasedSweep(store, spec, trials, "report-test", now);
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    sweep_id_ = sweep->sweep_id;
    const int64_t worker = sweep->worker;
    for (const v1::Trial& t : sweep->trials) {
      const v1::TrainConfig& c = t.config();
      const bool post = c.placement() == "post";
      const bool diverges = post && c.warmup_steps() == 0 && c.lr() > 5e-3;
      const double final_loss = post ? 2.6 + c.seed() / 10.0 + (c.warmup_steps() == 0 ? 0.3 : 0.0)
                                     : (c.lr() > 5e-3 ? 1.8 : 2.0) + c.seed() / 10.0;
      v1::ReportProgressRequest progress = testing::ProgressOf(worker, t);
      const int last = diverges ? 40 : 100;
      v1::MetricPoint* init = testing::AddPoint(progress, 0);
      init->set_val_loss(kL0);
      init->set_output_log_z(5.5);
      for (int step = 10; step <= last; step += 10) {
        v1::MetricPoint* m = testing::AddPoint(progress, step);
        m->set_train_loss(final_loss + (100 - step) / 50.0);
        if (step % 20 == 0) {
          m->set_val_loss(diverges ? 3.0 + step / 10.0 : final_loss + (100 - step) / 40.0);
          m->set_output_log_z(diverges ? 5.5 + step / 5.0 : 5.5 - step / 100.0);
        }
      }
      for (int step = 0; step <= last; step += 20) {
        v1::StepDiagnostics* d = progress.add_diagnostics();
        d->set_step(step);
        for (int l = 0; l < 2; ++l) {
          v1::LayerDiagnostics* ld = d->add_layers();
          ld->set_layer(l);
          ld->set_max_attn_logit((diverges ? 3.0 * std::pow(2.0, step / 8.0) : 2.0 + step / 100.0) - (1 - l) * 0.5);
          if (step == 0) continue;
          ld->set_update_ratio_qkv(0.001 * (l + 1));
          ld->set_update_ratio_proj(0.001 * (l + 1));
          ld->set_update_ratio_fc1(0.002 * (l + 1));
          ld->set_update_ratio_fc2(0.003 * (l + 1) * (diverges ? step / 10.0 : 1.0));
        }
      }
      v1::LayerGradNorms* g = progress.add_layer_grad_norms();
      g->set_step(0);
      for (int l = 0; l < 2; ++l) {
        for (const char* matrix : {"ffn.fc1", "ffn.fc2"}) {
          testing::AddNorm(g, l, matrix, (post ? 1.2 + 0.4 * l : 0.9 - 0.1 * l) + 0.05 * c.seed());
        }
      }
      ASSERT_TRUE(store.ReportProgress(progress, now).ok());
      v1::FinishTrialRequest finish =
          testing::FinishOf(worker, t, diverges ? v1::TRIAL_DIVERGED : v1::TRIAL_SUCCEEDED);
      finish.mutable_result()->set_init_val_loss(kL0);
      if (diverges) {
        finish.mutable_result()->set_diverged_step(last);
      } else {
        finish.mutable_result()->set_final_val_loss(final_loss);
      }
      trial_ids_[{c.placement(), c.warmup_steps(), c.lr(), c.seed()}] = t.id();
      ASSERT_TRUE(store.FinishTrial(finish, now).ok());
    }
  }

  int64_t sweep_id_ = 0;
  std::map<std::tuple<std::string, int, double, int>, int64_t> trial_ids_;  // (placement, warm-up, lr, seed)
};

TEST_F(ReportCliTest, WritesThePageOfARealSweep) {
  const std::string out = dir_ + "/report";
  CommandResult r = Cli({"report", std::to_string(sweep_id_), "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(out + "/index.html: sweep " + std::to_string(sweep_id_) + ", 16 trials"));
  const std::string html = ReadFile(out + "/index.html");
  EXPECT_THAT(html, HasSubstrs({"report &lt;e2e&gt; &amp; &quot;co&quot;",
                                // Cells over two seeds, the diverged cell, the best cell outlined.
                                "Post-LN, warm-up 0, lr 1e-03: 2.950 \u00b10.071",
                                "Post-LN, warm-up 0, lr 1e-02: diverged 2/2 seeds",
                                "class=\"cell near\"><title>Pre-LN, warm-up 0, lr 1e-02: 1.850",
                                // Curves from the stored metrics, norms from the stored step-0 rows.
                                "<title>trial ", "<title>Post-LN W2 (fc2), layer 1: 1.6250</title>"}));
  // plateaued 0 and the failure rate, the view's (0% with the rule, none before).
  EXPECT_TRUE(std::regex_search(html, std::regex("<td>Pre-LN</td><td>8</td><td>8</td><td>0</td><td>0</td>"
                                                 "<td>(0%|&ndash;)</td><td>0</td><td>0</td><td>0</td><td>1.800</td>")));
  // Loss against lr: the diverged cell at l0, from the trials' init_val_loss,
  // above the data (1.85 to 2.95): at the top edge, which stands for it.
  EXPECT_THAT(html, HasSubstrs({"Post-LN, warm-up 0, lr 1e-02: no usable seed (2/2 diverged or non-finite), l0 "
                                "5.550, above the data: drawn at the top",
                                "<title>Post-LN: l0 (loss at initialisation) 5.550, above the data: the top edge "
                                "stands for it</title>",
                                "<title>Pre-LN, warm-up 100, lr 1e-02: 1.850 (2 seeds)</title>",
                                // LR sensitivity, by hand: Post-LN without warm-up ((2.95 - 2.95) +
                                // (5.55 - 2.95)) / 2 = 1.3; with warm-up both lrs give 2.65: 0; Pre-LN
                                // (0.2 + 0) / 2 = 0.1 at both warm-ups.
                                "<title>Post-LN, warm-up 0: LR sensitivity 1.300; l* 2.950 at lr 1e-03; l0 5.550; "
                                "2 lrs, 2 seeds at l0</title>",
                                "<title>Post-LN, warm-up 100: LR sensitivity 0.000; l* 2.650",
                                "<title>Pre-LN, warm-up 0: LR sensitivity 0.100; l* 1.850 at lr 1e-02; l0 5.550; "
                                "2 lrs, 0 seeds at l0</title>",
                                // Variance shares, by hand for Pre-LN: lr +-0.1 over the grand mean,
                                // seeds +-0.05, no warm-up effect: SS 0.08 and 0.02 of 0.1.
                                "<title>Pre-LN: peak lr 80.0%</title>", "<title>Pre-LN: seeds (residual) 20.0%</title>",
                                "<title>Pre-LN: warm-up 0.0%</title>"}));
  // Diagnostics from the stored rows: Post-LN's first failure above its best
  // lr (1e-3): lr 1e-2, both seeds diverged at step 40, the first by id; and
  // the best cell's seed 0.
  const int64_t diverged = trial_ids_.at({"post", 0, 1e-2, 0});
  const int64_t best = trial_ids_.at({"post", 100, 1e-3, 0});
  EXPECT_THAT(
      html, HasSubstrs({absl::StrCat(">Post-LN, first failure (diverged after step 40): trial ", diverged, "</text>"),
                        absl::StrCat(">Post-LN, best lr: trial ", best, "</text>"),
                        ">warm-up 0, lr 1e-02, seed 0; logit layer 1, update layer 1 fc2</text>",
                        absl::StrCat(">Pre-LN, best lr: trial ", trial_ids_.at({"pre", 0, 1e-2, 0}), "</text>"),
                        ">Pre-LN: no trial failed to train</text>", ">max q\u00b7k/\u221ad_head (log scale)</text>"}));
}

// GetTrial returns every trial's diagnostics; FetchReportData keeps those of
// the trials the page draws: Post-LN's best and first failure, Pre-LN's best.
TEST_F(ReportCliTest, FetchKeepsTheDiagnosticsOfThePlottedTrialsOnly) {
  client::SweepClient sweeps(scheduler_->address());
  const int64_t other = trial_ids_.at({"pre", 100, 1e-3, 1});
  auto stored = sweeps.GetTrial(other);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->diagnostics_size(), 6) << "the store keeps every trial's diagnostics";
  auto data = client::FetchReportData(sweeps, sweep_id_);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->trials.size(), 16u);
  std::set<int64_t> with;
  for (const v1::GetTrialResponse& t : data->trials) {
    if (t.diagnostics_size() > 0) with.insert(t.trial().id());
    EXPECT_FALSE(t.metrics().empty()) << "trial " << t.trial().id() << " lost its metrics";
  }
  EXPECT_EQ(with, (std::set<int64_t>{trial_ids_.at({"post", 0, 1e-2, 0}), trial_ids_.at({"post", 100, 1e-3, 0}),
                                     trial_ids_.at({"pre", 0, 1e-2, 0})}));
}

// FetchReportData reads ExportSweep (client/report/export_reader.h): every
// trial as GetTrial returns it, by index, but for what the export does not
// carry (the attempts; Trial's lease, last_* and boundary_line) and the
// metric fields the page does not draw (and the points left without any);
// the plotted trials' diagnostics alike whether they come from GetTrial or
// from the diagnostics export.
TEST_F(ReportCliTest, FetchReadsWhatGetTrialReturns) {
  client::SweepClient sweeps(scheduler_->address());
  const std::set<int64_t> plotted = {trial_ids_.at({"post", 0, 1e-2, 0}), trial_ids_.at({"post", 100, 1e-3, 0}),
                                     trial_ids_.at({"pre", 0, 1e-2, 0})};
  for (const int max_get_trials : {16, 0}) {
    SCOPED_TRACE(absl::StrCat("max_diagnostics_get_trials ", max_get_trials));
    client::FetchReportOptions options;
    options.max_diagnostics_get_trials = max_get_trials;
    auto data = client::FetchReportData(sweeps, sweep_id_, options);
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_EQ(data->trials.size(), 16u);
    for (size_t i = 0; i < data->trials.size(); ++i) {
      const v1::GetTrialResponse& got = data->trials[i];
      EXPECT_EQ(got.trial().index(), static_cast<int>(i));
      auto want = sweeps.GetTrial(got.trial().id());
      ASSERT_TRUE(want.ok()) << want.status();
      want->clear_attempts();
      v1::Trial& t = *want->mutable_trial();
      t.clear_lease_expires_at();
      t.clear_last_step();
      t.clear_last_train_loss();
      t.clear_last_val_loss();
      t.clear_boundary_line();
      const auto* d = v1::MetricPoint::descriptor();
      for (v1::MetricPoint& m : *want->mutable_metrics()) {
        for (int f = 0; f < d->field_count(); ++f) {
          const std::string& name = d->field(f)->name();
          if (name != "step" && std::find_if(std::begin(client::kReportMetricFields),
                                             std::end(client::kReportMetricFields),
                                             [&](const char* n) { return name == n; }) ==
                                    std::end(client::kReportMetricFields)) {
            m.GetReflection()->ClearField(&m, d->field(f));
          }
        }
      }
      // A point with none of them left is not kept: it draws nothing.
      google::protobuf::RepeatedPtrField<v1::MetricPoint> valued;
      for (v1::MetricPoint& m : *want->mutable_metrics()) {
        v1::MetricPoint step_only;
        step_only.set_step(m.step());
        if (m.ByteSizeLong() > step_only.ByteSizeLong()) *valued.Add() = std::move(m);
      }
      want->mutable_metrics()->Swap(&valued);
      if (!plotted.contains(t.id())) want->clear_diagnostics();
      EXPECT_FALSE(want->metrics().empty());
      EXPECT_FALSE(want->layer_grad_norms().empty());
      google::protobuf::util::MessageDifferencer differ;
      std::string diff;
      differ.ReportDifferencesToString(&diff);
      EXPECT_TRUE(differ.Compare(*want, got)) << "trial " << t.id() << ": " << diff;
    }
  }
}

TEST_F(ReportCliTest, BadInputIsAClearErrorAndANonZeroExit) {
  CommandResult unknown = Cli({"report", "999999", "--out", dir_ + "/unknown"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.output, HasSubstr("999999: no such sweep"));
  EXPECT_NE(system(absl::StrCat("test -e ", dir_, "/unknown").c_str()), 0) << "nothing written for a bad id";

  CommandResult no_out = Cli({"report", std::to_string(sweep_id_)});
  EXPECT_EQ(no_out.exit_code, 2);
  EXPECT_THAT(no_out.output, HasSubstr("--out DIR is required"));

  CommandResult bad_id = Cli({"report", "abc", "--out", dir_ + "/x"});
  EXPECT_EQ(bad_id.exit_code, 2);
  EXPECT_THAT(bad_id.output, HasSubstr("not an id: 'abc'"));

  const std::string file = dir_ + "/a-file";
  std::ofstream(file) << "x";
  CommandResult unwritable = Cli({"report", std::to_string(sweep_id_), "--out", file + "/sub"});
  EXPECT_EQ(unwritable.exit_code, 1);
  EXPECT_THAT(unwritable.output, HasSubstr("cannot create the directory " + file + "/sub"));
}

// The page as a browser draws it: a screenshot of the expected size with the
// heatmaps' colours on it, not a blank or an error page.
TEST_F(ReportCliTest, RendersInHeadlessChromium) {
  const std::string out = dir_ + "/shot";
  CommandResult r = Cli({"report", std::to_string(sweep_id_), "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string png = dir_ + "/report.png";
  CommandResult shot = Run({src_ + "/client/report_screenshot.sh", out, png, "1400x2000"});
  ASSERT_EQ(shot.exit_code, 0) << shot.output;
  const std::string bytes = ReadFile(png);
  EXPECT_GT(bytes.size(), 20000u) << "a screenshot of charts is not this small";
  auto img = testing::DecodePng(bytes);
  ASSERT_TRUE(img.ok()) << img.status();
  EXPECT_EQ(img->width, 1400);
  EXPECT_EQ(img->height, 2000);
  int64_t non_white = 0, yellow = 0, purple = 0, red = 0;
  for (size_t i = 0; i + 2 < img->rgb.size(); i += 3) {
    const int R = img->rgb[i], G = img->rgb[i + 1], B = img->rgb[i + 2];
    non_white += R < 240 || G < 240 || B < 240;
    yellow += R > 220 && G > 200 && B < 90;             // the best cell (viridis #fde725)
    purple += R < 100 && G < 40 && B > 60 && B < 130;   // the worst cell (#440154)
    red += R > 190 && G < 90 && B < 90;                 // diverged hatching, Post-LN lines
  }
  const int64_t pixels = static_cast<int64_t>(img->width) * img->height;
  EXPECT_GT(non_white, pixels / 50) << "the page looks blank";
  EXPECT_GT(yellow, 1000) << "no best-cell colour: the heatmap did not draw";
  EXPECT_GT(purple, 1000) << "no worst-cell colour: the heatmap did not draw";
  EXPECT_GT(red, 200) << "no diverged hatching or Post-LN lines";
}

// Pixels near a colour (within 10 per channel).
int64_t CountColour(const testing::PngImage& img, int r, int g, int b) {
  int64_t n = 0;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3) {
    n += std::abs(img.rgb[i] - r) <= 10 && std::abs(img.rgb[i + 1] - g) <= 10 && std::abs(img.rgb[i + 2] - b) <= 10;
  }
  return n;
}

// A page rendered and shot in headless Chromium, decoded.
absl::StatusOr<testing::PngImage> Screenshot(const client::ReportData& data, const std::string& dir,
                                             const std::string& size) {
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  if (src == nullptr) return absl::FailedPreconditionError("run under ctest (NORMSWEEP_SOURCE_DIR)");
  if (absl::Status s = client::WriteReport(dir, client::RenderReportHtml(data)); !s.ok()) return s;
  const std::string png = dir + "/page.png";
  auto p = testing::Subprocess::Start({std::string(src) + "/client/report_screenshot.sh", dir, png, size}, {},
                                      dir + "/shot.out");
  if (!p.ok()) return p.status();
  if (const int rc = p->Wait(180); rc != 0) {
    return absl::InternalError(absl::StrCat("report_screenshot.sh exited ", rc, ": ", ReadFile(dir + "/shot.out")));
  }
  return testing::DecodePng(ReadFile(png));
}

// The figures of the newer measures as a browser draws them, from hand-made
// data (no scheduler): the page is tall, so the window is too.
TEST(ReportFiguresScreenshotTest, RendersTheNewFiguresInHeadlessChromium) {
  std::string dir = ::testing::TempDir() + "report_figures_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const testing::Figures fig = testing::LiteratureFigures();
  auto img = Screenshot(fig.data, dir + "/all", "1400x4400");
  ASSERT_TRUE(img.ok()) << img.status();
  ASSERT_EQ(img->width, 1400);
  ASSERT_EQ(img->height, 4400);
  // The shares bar: Post-LN's is 380 px wide, 22 high; lr 60%, warm-up
  // 10%, interaction 25% (anti-aliased edges aside).
  EXPECT_GT(CountColour(*img, 0xff, 0x7f, 0x0e), 0.6 * 380 * 22 * 0.9) << "no lr share bar";
  EXPECT_GT(CountColour(*img, 0x94, 0x67, 0xbd), 0.1 * 380 * 22 * 0.8) << "no warm-up share bar";
  EXPECT_GT(CountColour(*img, 0x2c, 0xa0, 0x2c), 0.25 * 380 * 22 * 0.8) << "no interaction share bar";
  // The diagnostics draw their lines in the placements' colours: the same
  // page without them has fewer such pixels (three lines a placement, some
  // dashed, of up to 330 px; anti-aliasing leaves about a pixel a column in
  // the exact colour, and nothing else on the page changes colour).
  client::ReportData bare = fig.data;
  for (v1::GetTrialResponse& t : bare.trials) {
    t.clear_diagnostics();
    for (v1::MetricPoint& m : *t.mutable_metrics()) m.clear_output_log_z();
  }
  auto without = Screenshot(bare, dir + "/bare", "1400x4400");
  ASSERT_TRUE(without.ok()) << without.status();
  // Post-LN #d55e00, Pre-LN #0072b2 (client/report/svg.cc's PlacementColour).
  EXPECT_GT(CountColour(*img, 0xd5, 0x5e, 0x00) - CountColour(*without, 0xd5, 0x5e, 0x00), 300)
      << "no Post-LN diagnostics curves";
  EXPECT_GT(CountColour(*img, 0x00, 0x72, 0xb2) - CountColour(*without, 0x00, 0x72, 0xb2), 300)
      << "no Pre-LN diagnostics curves";
  // The page ends inside the window: the last figures were drawn.
  int last_row = 0;
  for (int y = 0; y < img->height; ++y) {
    for (int x = 0; x < img->width; ++x) {
      const size_t i = (static_cast<size_t>(y) * img->width + x) * 3;
      if (img->rgb[i] < 240 || img->rgb[i + 1] < 240 || img->rgb[i + 2] < 240) last_row = y;
    }
  }
  EXPECT_LT(last_row, img->height - 40) << "the page is taller than the window: grow the window";
}

}  // namespace
}  // namespace normsweep
