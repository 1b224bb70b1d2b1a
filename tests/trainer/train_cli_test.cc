// normsweep-train as users and the worker run it: modes, flags, events,
// exit codes and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "trainer/safetensors.h"
#include "proto/schema/train_config.h"

extern char** environ;

namespace normsweep::trainer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

std::string Binary() {
  const char* dir = std::getenv("NORMSWEEP_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/trainer/normsweep-train";
}

fs::path TempDir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("normsweep_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t Spawn(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
  std::vector<char*> argv;
  std::string bin = Binary();
  argv.push_back(bin.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

Result Wait(pid_t pid, const fs::path& out, const fs::path& err) {
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadAll(out);
  r.err = ReadAll(err);
  return r;
}

Result RunTrainer(const std::vector<std::string>& args) {
  static int n = 0;
  const fs::path out = TempDir() / ("out" + std::to_string(n)), err = TempDir() / ("err" + std::to_string(n));
  ++n;
  return Wait(Spawn(args, out, err), out, err);
}

std::vector<v1::TrainEvent> Events(const std::string& text) {
  std::vector<v1::TrainEvent> events;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto e = schema::TrainEventFromJson(line);
    EXPECT_TRUE(e.ok()) << line;
    if (e.ok()) events.push_back(*e);
  }
  return events;
}

const std::vector<std::string> kSmall = {"--layers", "2", "--d-model", "16", "--heads", "2", "--seq-len", "16",
                                         "--batch-size", "4", "--threads", "1"};

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

fs::path Corpus() {
  const fs::path p = TempDir() / "corpus.txt";
  if (!fs::exists(p)) {
    std::ofstream out(p);
    for (int i = 0; i < 300; ++i) out << "def f" << i << "(x):\n    return x * " << i << " + 1\n";
  }
  return p;
}

TEST(TrainCliTest, HelpAndDevices) {
  Result help = RunTrainer({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--warmup-steps"));
  Result devices = RunTrainer({"--list-devices"});
  EXPECT_EQ(devices.exit_code, 0);
  EXPECT_THAT(devices.out, HasSubstr("cpu"));
}

TEST(TrainCliTest, TrainEmitsTheDocumentedEvents) {
  Result r = RunTrainer(With({"train", "--steps", "6", "--lr", "1e-3", "--eval-every", "3", "--warmup-steps", "2"}, kSmall));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<v1::TrainEvent> events = Events(r.out);
  int steps = 0, finals = 0;
  std::vector<int> eval_steps, grad_norm_steps;
  std::optional<double> l0;
  for (size_t i = 0; i < events.size(); ++i) {
    const v1::TrainEvent& e = events[i];
    if (e.type() == "step") {
      ++steps;
      EXPECT_TRUE(e.has_train_loss() && e.has_lr() && e.has_grad_norm() && e.has_tokens_per_s());
    } else if (e.type() == "eval") {
      eval_steps.push_back(e.step());
      EXPECT_TRUE(e.has_val_loss() && e.has_val_accuracy() && e.has_output_log_z());
      if (e.step() == 0) l0 = e.val_loss();
      ASSERT_EQ(e.layer_diagnostics_size(), 2);
      for (int l = 0; l < 2; ++l) {
        const v1::LayerDiagnostics& d = e.layer_diagnostics(l);
        EXPECT_EQ(d.layer(), l);
        EXPECT_TRUE(d.has_layer() && d.has_max_attn_logit());
        // Update ratios from step 1 on, never at step 0.
        const bool updated = e.step() > 0;
        EXPECT_EQ(d.has_update_ratio_qkv(), updated);
        EXPECT_EQ(d.has_update_ratio_proj(), updated);
        EXPECT_EQ(d.has_update_ratio_fc1(), updated);
        EXPECT_EQ(d.has_update_ratio_fc2(), updated);
      }
      // From step 1 on, the step's gradient norms come just before its evaluation.
      if (e.step() > 0) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(events[i - 1].type(), "grad_norms");
        EXPECT_EQ(events[i - 1].step(), e.step());
      }
    } else if (e.type() == "grad_norms") {
      grad_norm_steps.push_back(e.step());
      EXPECT_EQ(e.layer_grad_norms_size(), 4);
    } else if (e.type() == "final") {
      ++finals;
      EXPECT_EQ(e.outcome(), "SUCCEEDED");
      EXPECT_EQ(e.step(), 6);
      EXPECT_EQ(e.backend(), "cpu");
      ASSERT_TRUE(l0.has_value());
      ASSERT_TRUE(e.has_init_val_loss());
      EXPECT_EQ(e.init_val_loss(), *l0);
    }
  }
  EXPECT_EQ(steps, 6);
  EXPECT_EQ(eval_steps, (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(grad_norm_steps, (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(finals, 1);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].type(), "eval");  // l0 before anything else
  EXPECT_EQ(events[0].step(), 0);
  // JSON lines use snake_case and print the step of the grad_norms event.
  EXPECT_THAT(r.out, HasSubstr("\"type\":\"grad_norms\",\"step\":0"));
  EXPECT_THAT(r.out, HasSubstr("\"train_loss\":"));
}

TEST(TrainCliTest, NoDiagnosticsDropsStepZeroAndTheDiagnostics) {
  Result r = RunTrainer(
      With({"train", "--steps", "6", "--lr", "1e-3", "--eval-every", "3", "--no-diagnostics"}, kSmall));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<int> eval_steps, grad_norm_steps;
  for (const auto& e : Events(r.out)) {
    if (e.type() == "eval") {
      eval_steps.push_back(e.step());
      EXPECT_FALSE(e.has_output_log_z());
      EXPECT_EQ(e.layer_diagnostics_size(), 0);
    } else if (e.type() == "grad_norms") {
      grad_norm_steps.push_back(e.step());
    } else if (e.type() == "final") {
      EXPECT_FALSE(e.has_init_val_loss());
    }
  }
  EXPECT_EQ(eval_steps, (std::vector<int>{3, 6}));
  EXPECT_EQ(grad_norm_steps, (std::vector<int>{0}));
}

struct BadFlags {
  std::vector<std::string> args;
  std::string message;
};

class TrainCliBadInputTest : public ::testing::TestWithParam<BadFlags> {};

TEST_P(TrainCliBadInputTest, ExitsTwoNamingTheField) {
  Result r = RunTrainer(With({"train"}, GetParam().args));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    All, TrainCliBadInputTest,
    ::testing::Values(BadFlags{{"--lr", "1e-3", "--placement", "middle"}, "placement"},
                      BadFlags{{"--lr", "1e-3", "--d-model", "100", "--heads", "3"}, "heads"},
                      BadFlags{{"--lr", "1e-3", "--warmup-steps", "-5"}, "warmup_steps"},
                      BadFlags{{"--lr", "nan"}, "lr"},
                      BadFlags{{"--lr", "0"}, "lr"},
                      BadFlags{{"--lr", "abc"}, "--lr: invalid value"},
                      BadFlags{{}, "lr: must be > 0"},
                      BadFlags{{"--lr", "1e-3", "--bogus", "1"}, "unknown flag --bogus"},
                      BadFlags{{"--lr", "1e-3", "--config", "/nonexistent.json"}, "--config"},
                      BadFlags{{"--lr", "1e-3", "--steps"}, "--steps needs a value"}));

// The probes' --placements: a column per placement, an unknown name refused.
TEST(TrainCliTest, ProbesTakePlacements) {
  Result r = RunTrainer({"probe", "hidden-norms", "--d", "32", "--layers", "2", "--draws", "1", "--placements",
                         "peri,deepnorm,mix,sandwich"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Peri-LN |x_l|^2/d"));
  EXPECT_THAT(r.out, HasSubstr("DeepNorm |x_post5|^2/d"));
  EXPECT_THAT(r.out, HasSubstr("Mix-LN |x_l|^2/d"));
  r = RunTrainer({"probe", "grad-norms", "--layers", "2", "--d-model", "16", "--heads", "2", "--seq-len", "8",
                  "--batch-size", "2", "--seeds", "1", "--depths", "2", "--placements", "pre,deepnorm"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Pre-LN W1"));
  EXPECT_THAT(r.out, HasSubstr("DeepNorm W2"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("Post-LN")));
  for (const char* probe : {"hidden-norms", "grad-norms"}) {
    r = RunTrainer({"probe", probe, "--placements", "post,middle"});
    EXPECT_EQ(r.exit_code, 2) << probe << r.out;
    EXPECT_THAT(r.err, HasSubstr("--placements: unknown placement 'middle'"));
    EXPECT_THAT(r.err, HasSubstr("deepnorm"));
  }
}

TEST(TrainCliTest, ConfigFileWithFlagOverrides) {
  const fs::path config = TempDir() / "config.json";
  std::ofstream(config) << R"({"placement": "pre", "lr": 0.002, "warmup_steps": 50, "layers": 3})";
  Result r = RunTrainer({"train", "--config", config.string(), "--layers", "4", "--print-config"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto c = schema::TrainConfigFromJson(r.out);
  ASSERT_TRUE(c.ok()) << r.out;
  EXPECT_EQ(c->placement(), "pre");
  EXPECT_EQ(c->layers(), 4);
  EXPECT_EQ(c->warmup_steps(), 50);
  EXPECT_DOUBLE_EQ(c->lr(), 0.002);

  std::ofstream(config) << R"({"placement": "pre", "lr": 0.002, "layres": 3})";
  Result bad = RunTrainer({"train", "--config", config.string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("layres"));
}

TEST(TrainCliTest, MissingDataFileFailsWithFinalEvent) {
  Result r = RunTrainer(With({"train", "--lr", "1e-3", "--steps", "3", "--data", "/nonexistent/corpus.txt"}, kSmall));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("data_file"));
  std::vector<v1::TrainEvent> events = Events(r.out);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].outcome(), "FAILED");
  EXPECT_THAT(events[0].error(), HasSubstr("data_file"));
}

// Without a GPU (CI), a cuda run fails cleanly: a FAILED final event whose
// error names the device, exit 1, no crash or hang. With one, it trains.
TEST(TrainCliTest, CudaDeviceWithoutAGpuFailsNamingTheDevice) {
  Result devices = RunTrainer({"--list-devices"});
  ASSERT_EQ(devices.exit_code, 0);
  if (devices.out.find("cuda:0") != std::string::npos) GTEST_SKIP() << "this machine has a GPU: see tests/gpu";
  Result r = RunTrainer(With({"train", "--lr", "1e-3", "--steps", "2", "--device", "cuda:0"}, kSmall));
  EXPECT_EQ(r.exit_code, 1);
  std::vector<v1::TrainEvent> events = Events(r.out);
  ASSERT_EQ(events.size(), 1u) << r.out;
  EXPECT_EQ(events[0].outcome(), "FAILED");
  EXPECT_THAT(events[0].error(), HasSubstr("device:"));
  EXPECT_THAT(events[0].error(), HasSubstr("cuda:0"));
  Result bf16 = RunTrainer(With({"train", "--lr", "1e-3", "--steps", "2", "--precision", "bf16"}, kSmall));
  EXPECT_EQ(bf16.exit_code, 2);
  EXPECT_THAT(bf16.err, HasSubstr("precision"));
}

TEST(TrainCliTest, CheckpointEvalAndGrads) {
  const fs::path ckpt = TempDir() / "model.safetensors", grads = TempDir() / "grads.safetensors";
  Result train = RunTrainer(With({"train", "--lr", "1e-3", "--steps", "3", "--data", Corpus().string(), "--checkpoint-out",
                           ckpt.string(), "--placement", "pre"},
                          kSmall));
  ASSERT_EQ(train.exit_code, 0) << train.err;
  Result eval = RunTrainer({"eval", "--checkpoint", ckpt.string(), "--data", Corpus().string()});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_THAT(eval.out, HasSubstr("\"loss\":"));
  const std::size_t bytes = fs::file_size(Corpus());
  EXPECT_THAT(eval.out, HasSubstr("\"tokens\":" + std::to_string(bytes / 17 * 16)));

  Result g = RunTrainer({"grads", "--checkpoint", ckpt.string(), "--data", Corpus().string(), "--batch-size", "3", "--out",
                  grads.string()});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  auto file = ReadSafeTensors(grads.string());
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->tensors.count("ln_f.weight"));
  EXPECT_TRUE(file->tensors.count("blocks.1.ffn.fc2.weight"));
  EXPECT_EQ(file->tensors.count("optimizer.m.head.weight"), 0u);

  // Corrupt checkpoint: a clear error, not a crash.
  const fs::path corrupt = TempDir() / "corrupt.safetensors";
  std::string data = ReadAll(ckpt);
  std::ofstream(corrupt, std::ios::binary) << data.substr(0, data.size() / 2);
  Result bad = RunTrainer({"eval", "--checkpoint", corrupt.string(), "--data", Corpus().string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("checkpoint"));
  Result missing = RunTrainer({"grads", "--checkpoint", ckpt.string(), "--data", Corpus().string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--batch-size"));
}

// val_loss_progress (issue 34): the val loss at the last evaluation at or
// before floor(0.75 * steps) minus the final one, in the final event; a
// resumed run carries its earlier evaluations in the checkpoint; fewer than
// 3 evaluations report none.
TEST(TrainCliTest, FinalEventReportsTheLastQuartersProgress) {
  auto eval_losses = [](const std::vector<v1::TrainEvent>& events) {
    std::map<int, double> out;
    for (const v1::TrainEvent& e : events) {
      if (e.type() == "eval") out[e.step()] = e.val_loss();
    }
    return out;
  };
  auto final_of = [](const std::vector<v1::TrainEvent>& events) {
    for (const v1::TrainEvent& e : events) {
      if (e.type() == "final") return e;
    }
    return v1::TrainEvent();
  };
  Result solo = RunTrainer(With({"train", "--lr", "3e-3", "--steps", "8", "--eval-every", "2"}, kSmall));
  ASSERT_EQ(solo.exit_code, 0) << solo.err;
  std::map<int, double> evals = eval_losses(Events(solo.out));
  ASSERT_EQ(evals.size(), 5u) << solo.out;  // steps 0, 2, 4, 6, 8
  v1::TrainEvent f = final_of(Events(solo.out));
  ASSERT_TRUE(f.has_val_loss_progress()) << solo.out;
  EXPECT_DOUBLE_EQ(f.val_loss_progress(), evals[6] - evals[8]);

  // Resumed at step 6 of 8: the reference (step 6) comes from the checkpoint.
  const fs::path ckpt = TempDir() / "progress.safetensors";
  Result first = RunTrainer(
      With({"train", "--lr", "3e-3", "--steps", "6", "--eval-every", "2", "--checkpoint-out", ckpt.string()}, kSmall));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::map<int, double> before = eval_losses(Events(first.out));
  ASSERT_EQ(before.size(), 4u) << first.out;  // steps 0, 2, 4, 6
  Result resumed = RunTrainer(
      With({"train", "--lr", "3e-3", "--steps", "8", "--eval-every", "2", "--resume", ckpt.string()}, kSmall));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  evals = eval_losses(Events(resumed.out));
  ASSERT_EQ(evals.size(), 1u) << resumed.out;  // 8 in this process; 0 to 6 from the checkpoint
  f = final_of(Events(resumed.out));
  ASSERT_TRUE(f.has_val_loss_progress()) << resumed.out;
  EXPECT_DOUBLE_EQ(f.val_loss_progress(), before.at(6) - evals[8]);
  // Resumed from its final checkpoint: step 6 is evaluated again, not counted twice.
  Result again = RunTrainer(
      With({"train", "--lr", "3e-3", "--steps", "6", "--eval-every", "2", "--resume", ckpt.string()}, kSmall));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  f = final_of(Events(again.out));
  ASSERT_TRUE(f.has_val_loss_progress()) << again.out;
  EXPECT_DOUBLE_EQ(f.val_loss_progress(), before.at(4) - eval_losses(Events(again.out)).at(6));

  Result two = RunTrainer(With({"train", "--lr", "3e-3", "--steps", "4", "--eval-every", "4"}, kSmall));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_FALSE(final_of(Events(two.out)).has_val_loss_progress()) << two.out;  // steps 0 and 4 only
}

TEST(TrainCliTest, SigtermCancelsAndWritesTheCheckpoint) {
  const fs::path out = TempDir() / "cancel.out", err = TempDir() / "cancel.err", ckpt = TempDir() / "cancel.safetensors";
  pid_t pid = Spawn(With({"train", "--lr", "1e-3", "--steps", "1000000", "--eval-every", "0", "--checkpoint-out",
                          ckpt.string()},
                         kSmall),
                    out, err);
  // A failed spawn leaves -1, and kill(-1, ...) signals every process we may
  // signal (run outside the build tree without NORMSWEEP_BINARY_DIR, it did).
  ASSERT_GT(pid, 0) << "could not start " << Binary();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ReadAll(out).find("\"type\":\"step\"") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGTERM);
  Result r = Wait(pid, out, err);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<v1::TrainEvent> events = Events(r.out);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type(), "final");
  EXPECT_EQ(events.back().outcome(), "CANCELLED");
  EXPECT_TRUE(fs::exists(ckpt));
}

// Writes a config file of kSmall's model with these fields added.
fs::path SmallConfig(const std::string& name, const std::string& extra) {
  const fs::path p = TempDir() / name;
  std::ofstream(p) << "{\"layers\":2,\"d_model\":16,\"heads\":2,\"seq_len\":16,\"batch_size\":4,\"threads\":1,"
                   << "\"steps\":20,\"eval_every\":10,\"eval_batches\":2,\"data_file\":\"" << Corpus().string() << "\","
                   << extra << "}";
  return p;
}

// The final event of each fused_index.
std::map<int, v1::TrainEvent> FinalsByIndex(const std::vector<v1::TrainEvent>& events) {
  std::map<int, v1::TrainEvent> finals;
  for (const v1::TrainEvent& e : events) {
    if (e.type() == "final") finals[e.fused_index()] = e;
  }
  return finals;
}

TEST(TrainCliTest, FusedConfigsTrainEachTrialAsItsSoloRun) {
  const fs::path a = SmallConfig("fused_a.json", "\"lr\":0.001,\"seed\":1");
  const fs::path b = SmallConfig("fused_b.json", "\"lr\":0.01,\"warmup_steps\":5,\"seed\":2,\"beta2\":0.95");
  Result fused = RunTrainer({"train", "--config", a.string() + "," + b.string()});
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  const std::vector<v1::TrainEvent> events = Events(fused.out);
  std::map<int, v1::TrainEvent> finals = FinalsByIndex(events);
  ASSERT_EQ(finals.size(), 2u) << fused.out;
  int steps1 = 0;
  for (const v1::TrainEvent& e : events) steps1 += e.type() == "step" && e.fused_index() == 1;
  EXPECT_EQ(steps1, 20);
  EXPECT_THAT(fused.out, HasSubstr("\"fused_index\":1"));
  for (int k = 0; k < 2; ++k) {
    Result solo = RunTrainer({"train", "--config", (k == 0 ? a : b).string()});
    ASSERT_EQ(solo.exit_code, 0) << solo.err;
    EXPECT_THAT(solo.out, Not(HasSubstr("fused_index")));
    const v1::TrainEvent want = Events(solo.out).back();
    EXPECT_EQ(finals[k].outcome(), "SUCCEEDED");
    EXPECT_EQ(finals[k].final_val_loss(), want.final_val_loss()) << "trial " << k;
    EXPECT_EQ(finals[k].init_val_loss(), want.init_val_loss()) << "trial " << k;
  }
}

TEST(TrainCliTest, FusedConfigsThatDifferInShapeOrPathCountsAreRefused) {
  const fs::path a = SmallConfig("fused_shape_a.json", "\"lr\":0.001");
  const fs::path b = SmallConfig("fused_shape_b.json", "\"lr\":0.001,\"placement\":\"pre\"");
  Result shape = RunTrainer({"train", "--config", a.string() + "," + b.string()});
  EXPECT_EQ(shape.exit_code, 2);
  EXPECT_THAT(shape.err, HasSubstr("config 1: placement 'pre' differs"));
  Result count = RunTrainer({"train", "--config", a.string() + "," + a.string(), "--checkpoint-out", "/tmp/x"});
  EXPECT_EQ(count.exit_code, 2);
  EXPECT_THAT(count.err, HasSubstr("--checkpoint-out: 1 paths for 2 configs"));
  Result empty = RunTrainer({"train", "--config", a.string() + ","});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_THAT(empty.err, HasSubstr("--config: an empty path"));
}

// A fused run with a config the settings refuse (validated once, as the
// trainer starts) runs no trial: exit 2, and that trial's FAILED final
// event, which the worker reads as its outcome.
TEST(TrainCliTest, FusedRunWithAnInvalidConfigIsRefusedWithThatTrialsFinalEvent) {
  const fs::path a = SmallConfig("fused_valid_a.json", "\"lr\":0.001");
  const fs::path b = SmallConfig("fused_valid_b.json", "\"lr\":-1");
  Result r = RunTrainer({"train", "--config", a.string() + "," + b.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("config 1: lr"));
  std::vector<v1::TrainEvent> events = Events(r.out);
  ASSERT_EQ(events.size(), 1u) << r.out;
  EXPECT_EQ(events[0].outcome(), "FAILED");
  EXPECT_EQ(events[0].fused_index(), 1);
  EXPECT_THAT(events[0].error(), HasSubstr("lr"));
}

// A refused fused run leaves an existing events file as it was (it used to
// be opened, and so emptied, before the configs were checked), and two
// trials given one checkpoint path are refused naming both (issue 34).
TEST(TrainCliTest, RefusedFusedRunsLeaveTheEventsFileAndShareNoCheckpoint) {
  const fs::path a = SmallConfig("fused_keep_a.json", "\"lr\":0.001");
  const fs::path b = SmallConfig("fused_keep_b.json", "\"lr\":0.001,\"placement\":\"pre\"");
  const fs::path events = TempDir() / "fused_keep.events";
  std::ofstream(events) << "{\"type\":\"final\"}\n";
  Result shape = RunTrainer({"train", "--config", a.string() + "," + b.string(), "--events", events.string()});
  EXPECT_EQ(shape.exit_code, 2);
  EXPECT_THAT(shape.err, HasSubstr("placement 'pre' differs"));
  EXPECT_EQ(fs::file_size(events), std::string("{\"type\":\"final\"}\n").size());

  const fs::path same = TempDir() / "fused_same.safetensors";
  Result shared = RunTrainer({"train", "--config", a.string() + "," + a.string() + "," + a.string(), "--checkpoint-out",
                              "," + same.string() + "," + same.string(), "--events", events.string()});
  EXPECT_EQ(shared.exit_code, 2);
  EXPECT_THAT(shared.err, HasSubstr("--checkpoint-out: trials 1 and 2 have the same path"));
  EXPECT_EQ(fs::file_size(events), std::string("{\"type\":\"final\"}\n").size());
  EXPECT_FALSE(fs::exists(same));
  // Empty paths (no checkpoint) may repeat.
  Result none = RunTrainer({"train", "--config", a.string() + "," + a.string(), "--checkpoint-out", ",",
                            "--steps", "1", "--eval-every", "0"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
}

TEST(TrainCliTest, StdinCancelStopsOneFusedTrialAndTheOtherGoesOn) {
  const fs::path a = SmallConfig("fused_cancel_a.json", "\"lr\":0.001,\"steps\":1000000,\"eval_every\":0");
  const fs::path out = TempDir() / "fused_cancel.out", err = TempDir() / "fused_cancel.err";
  int in[2];
  ASSERT_EQ(pipe(in), 0);
  std::vector<std::string> args = {Binary(), "train", "--config", a.string() + "," + a.string(), "--lr", "0.002"};
  std::vector<char*> argv;
  for (std::string& x : args) argv.push_back(x.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_addclose(&actions, in[1]);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  ASSERT_GT(pid, 0);
  auto wait_for = [&](const std::string& needle) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (ReadAll(out).find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ReadAll(out).find(needle) != std::string::npos;
  };
  EXPECT_TRUE(wait_for("\"fused_index\":1"));
  const std::string line = "noise\ncancel 7\ncancel 1\n";
  ASSERT_EQ(write(in[1], line.data(), line.size()), static_cast<ssize_t>(line.size()));
  EXPECT_TRUE(wait_for("\"outcome\":\"CANCELLED\""));
  // Trial 0 goes on: more of its steps come after trial 1's final event.
  const size_t cancelled_at = ReadAll(out).size();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ReadAll(out).find("\"type\":\"step\"", cancelled_at) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGTERM);
  close(in[1]);
  Result r = Wait(pid, out, err);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<int, v1::TrainEvent> finals = FinalsByIndex(Events(r.out));
  ASSERT_EQ(finals.size(), 2u);
  EXPECT_EQ(finals[1].outcome(), "CANCELLED");
  EXPECT_EQ(finals[0].outcome(), "CANCELLED");
  EXPECT_GT(finals[0].step(), finals[1].step());
}

}  // namespace
}  // namespace normsweep::trainer
