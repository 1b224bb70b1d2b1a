// `normsweep report` as a user runs it: a throwaway PostgreSQL holding a
// finished sweep (written through the store as a worker would: leases,
// progress with metrics and step-0 gradient norms, outcomes), a real
// normsweep-scheduler, the CLI over gRPC; then the page loaded in headless
// Chromium (client/report_screenshot.sh) and the screenshot checked. Without
// Chromium the screenshot test fails: CI installs it (deploy/install-deps.sh).
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "db/postgres_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/postgres_instance.h"
#include "tests/common/scheduler_process.h"
#include "tests/common/subprocess.h"
#include "tests/report/png_image.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

class ReportCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("NORMSWEEP_BINARY_DIR");
    const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
    ASSERT_TRUE(bin != nullptr && src != nullptr) << "run under ctest (NORMSWEEP_BINARY_DIR, NORMSWEEP_SOURCE_DIR)";
    bin_ = bin;
    src_ = src;
    static int counter = 0;
    auto pg = testing::SharedPostgres();
    ASSERT_TRUE(pg.ok()) << pg.status();
    const std::string name = absl::StrCat("report_cli_", ++counter);
    auto conninfo = (*pg)->CreateDatabase(name);
    ASSERT_TRUE(conninfo.ok()) << conninfo.status();
    dir_ = absl::StrCat((*pg)->dir(), "/", name);
    ASSERT_EQ(system(absl::StrCat("mkdir -p ", dir_).c_str()), 0);
    db::PostgresStoreOptions options;
    options.connect.conninfo = *conninfo;
    auto store = db::OpenPostgresStore(options);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_NO_FATAL_FAILURE(FillSweep(*store->store));
    auto s = testing::StartScheduler(bin_, *conninfo, dir_);
    ASSERT_TRUE(s.ok()) << s.status();
    scheduler_.emplace(*std::move(s));
  }

  // post/pre x warm-up {0, 100} x lr {1e-3, 1e-2} x seeds {0, 1}, 2 layers.
  // Post-LN without warm-up diverges at lr 1e-2; the other losses are
  // pre 2.0 + seed/10 (1.8 at lr 1e-2), post 2.6 + seed/10 (+0.3 without warm-up).
  void FillSweep(db::Store& store) {
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
    auto sweep = store.CreateSweep("", spec, trials, now);
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    sweep_id_ = sweep->sweep.id();
    v1::RegisterWorkerRequest reg;
    reg.set_name("report-test");
    auto worker = store.RegisterWorker(reg, now);
    ASSERT_TRUE(worker.ok()) << worker.status();
    while (true) {
      auto leased = store.LeaseTrial(*worker, now, absl::Minutes(10));
      ASSERT_TRUE(leased.ok()) << leased.status();
      if (!leased->has_value()) break;
      const v1::Trial& t = **leased;
      const v1::TrainConfig& c = t.config();
      const bool post = c.placement() == "post";
      const bool diverges = post && c.warmup_steps() == 0 && c.lr() > 5e-3;
      const double final_loss = post ? 2.6 + c.seed() / 10.0 + (c.warmup_steps() == 0 ? 0.3 : 0.0)
                                     : (c.lr() > 5e-3 ? 1.8 : 2.0) + c.seed() / 10.0;
      v1::ReportProgressRequest progress;
      progress.set_worker_id(*worker);
      progress.set_trial_id(t.id());
      progress.set_attempt(t.attempts());
      const int last = diverges ? 40 : 100;
      for (int step = 10; step <= last; step += 10) {
        v1::MetricPoint* m = progress.add_points();
        m->set_step(step);
        m->set_train_loss(final_loss + (100 - step) / 50.0);
        if (step % 20 == 0) m->set_val_loss(diverges ? 3.0 + step / 10.0 : final_loss + (100 - step) / 40.0);
      }
      v1::LayerGradNorms* g = progress.add_layer_grad_norms();
      g->set_step(0);
      for (int l = 0; l < 2; ++l) {
        for (const char* matrix : {"ffn.fc1", "ffn.fc2"}) {
          v1::LayerGradNorm* n = g->add_norms();
          n->set_layer(l);
          n->set_matrix(matrix);
          n->set_norm((post ? 1.2 + 0.4 * l : 0.9 - 0.1 * l) + 0.05 * c.seed());
        }
      }
      ASSERT_TRUE(store.ReportProgress(progress, now).ok());
      v1::FinishTrialRequest finish;
      finish.set_worker_id(*worker);
      finish.set_trial_id(t.id());
      finish.set_attempt(t.attempts());
      if (diverges) {
        finish.set_outcome(v1::TRIAL_DIVERGED);
        finish.mutable_result()->set_diverged_step(last);
      } else {
        finish.set_outcome(v1::TRIAL_SUCCEEDED);
        finish.mutable_result()->set_final_val_loss(final_loss);
      }
      ASSERT_TRUE(store.FinishTrial(finish, now).ok());
    }
  }

  CommandResult Run(const std::vector<std::string>& argv, double timeout_s = 180) {
    static int n = 0;
    const std::string log = absl::StrCat(dir_, "/cmd-", n++, ".out");
    auto p = testing::Subprocess::Start(argv, {{"NORMSWEEP_SCHEDULER", scheduler_->address()}}, log);
    EXPECT_TRUE(p.ok()) << p.status();
    CommandResult r;
    if (!p.ok()) return r;
    r.exit_code = p->Wait(timeout_s);
    r.output = ReadFile(log);
    return r;
  }

  CommandResult Cli(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {bin_ + "/client/normsweep"};
    argv.insert(argv.end(), args.begin(), args.end());
    return Run(argv);
  }

  std::string bin_, src_, dir_;
  int64_t sweep_id_ = 0;
  std::optional<testing::SchedulerProcess> scheduler_;
};

TEST_F(ReportCliTest, WritesThePageOfARealSweep) {
  const std::string out = dir_ + "/report";
  CommandResult r = Cli({"report", std::to_string(sweep_id_), "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(out + "/index.html: sweep " + std::to_string(sweep_id_) + ", 16 trials"));
  const std::string html = ReadFile(out + "/index.html");
  EXPECT_THAT(html, HasSubstr("report &lt;e2e&gt; &amp; &quot;co&quot;"));
  // Cells over two seeds, the diverged cell, the best cell outlined.
  EXPECT_THAT(html, HasSubstr("Post-LN, warm-up 0, lr 1e-03: 2.950 \u00b10.071"));
  EXPECT_THAT(html, HasSubstr("Post-LN, warm-up 0, lr 1e-02: diverged 2/2 seeds"));
  EXPECT_THAT(html, HasSubstr("class=\"cell near\"><title>Pre-LN, warm-up 0, lr 1e-02: 1.850"));
  // Curves from the stored metrics, norms from the stored step-0 rows.
  EXPECT_THAT(html, HasSubstr("<title>trial "));
  EXPECT_THAT(html, HasSubstr("<title>Post-LN W2 (fc2), layer 1: 1.6250</title>"));
  EXPECT_THAT(html, HasSubstr("<td>Pre-LN</td><td>8</td><td>8</td><td>0</td><td>0</td><td>0</td><td>1.800</td>"));
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

}  // namespace
}  // namespace normsweep
