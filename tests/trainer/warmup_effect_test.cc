// The core of the paper's Figure 2 on a run short enough for the test suite:
// a 12-layer byte LM at peak lr 3e-3 without warm-up. Post-LN does not get
// below the loss of a byte-frequency (unigram) model; Pre-LN trains. (The
// full warm-up x lr picture is the local stack's sweep, deploy/sweeps/paper.yaml.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "trainer/trainer.h"
#include "tests/trainer/valid_settings.h"

namespace normsweep::trainer {
namespace {

namespace fs = std::filesystem;

class NullSink : public EventSink {
 public:
  void OnStep(const StepEvent&) override {}
  void OnEval(const EvalEvent&) override {}
  void OnGradNorms(const GradNormsEvent&) override {}
  void OnFinal(const FinalEvent&) override {}
};

// This repository's own sources as a byte-level corpus (no download, no data files).
std::string WriteCorpus() {
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  std::string text;
  for (const char* dir : {"trainer", "scheduler", "worker", "client", "db", "tests/trainer", "tests/reference"}) {
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(src ? src : ".") / dir)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".cc" || ext == ".h" || ext == ".py" || ext == ".sql")) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      std::ifstream in(f);
      std::stringstream ss;
      ss << in.rdbuf();
      text += ss.str();
    }
  }
  const fs::path path = fs::temp_directory_path() / ("normsweep_warmup_corpus_" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// Cross-entropy of the validation part (last 10%) under the training part's byte frequencies.
double UnigramLoss(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t split = b.size() - b.size() / 10;
  std::map<unsigned char, double> counts;
  for (size_t i = 0; i < split; ++i) counts[static_cast<unsigned char>(b[i])] += 1;
  double loss = 0;
  for (size_t i = split; i < b.size(); ++i) {
    const double c = counts.count(static_cast<unsigned char>(b[i])) ? counts[static_cast<unsigned char>(b[i])] : 1;
    loss -= std::log(c / static_cast<double>(split));
  }
  return loss / static_cast<double>(b.size() - split);
}

TEST(WarmupEffectTest, PostLnNeedsWarmupWherePreLnDoesNot) {
  const std::string corpus = WriteCorpus();
  const double unigram = UnigramLoss(corpus);
  std::map<Placement, double> final_loss;
  for (Placement p : {Placement::kPostLN, Placement::kPreLN}) {
    TrainSettings s;
    s.model = ModelConfig{.placement = p, .layers = 12, .d_model = 64, .heads = 4, .d_ff = 128, .seq_len = 64};
    s.batch_size = 16;
    s.steps = 120;
    s.schedule = ScheduleConfig{.peak_lr = 3e-3, .warmup_steps = 0, .kind = ScheduleKind::kConstant, .total_steps = 120};
    s.data.data_file = corpus;
    s.eval_every = 0;
    s.eval_batches = 4;
    s.seed = 1;
    s.threads = 1;
    NullSink sink;
    const FinalEvent f = RunTraining(Valid(s), RunOptions{}, sink);
    ASSERT_EQ(f.outcome, Outcome::kSucceeded) << f.error;
    ASSERT_TRUE(f.final_val_loss.has_value());
    final_loss[p] = *f.final_val_loss;
  }
  std::filesystem::remove(corpus);
  RecordProperty("unigram_loss", std::to_string(unigram));
  RecordProperty("post_ln_final_val_loss", std::to_string(final_loss[Placement::kPostLN]));
  RecordProperty("pre_ln_final_val_loss", std::to_string(final_loss[Placement::kPreLN]));
  // Post-LN without warm-up learns nothing beyond byte frequencies...
  EXPECT_GT(final_loss[Placement::kPostLN], unigram - 0.05);
  // ...while Pre-LN at the same settings is well below them.
  EXPECT_LT(final_loss[Placement::kPreLN], unigram - 0.2);
  EXPECT_LT(final_loss[Placement::kPreLN], final_loss[Placement::kPostLN] - 0.3);
}

}  // namespace
}  // namespace normsweep::trainer
