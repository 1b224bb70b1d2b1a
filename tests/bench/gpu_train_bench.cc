// normsweep's side of the GPU benchmark (tests/bench/gpu_vs_pytorch.py): runs
// the real training loop (RunTraining: batches, forward/backward, gradient
// norm, Adam) on one device and prints one JSON line with its throughput.
// Links only the trainer core, so it builds on a bare GPU machine
// (NORMSWEEP_TRAINER_ONLY).
//   normsweep-gpu-bench [--device cuda:0] [--precision fp32|tf32|bf16]
//     [--placement pre] [--layers 6] [--d-model 128] [--heads 4] [--d-ff 4*d-model]
//     [--seq-len 64] [--batch-size 32] [--steps 60] [--warmup 10]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "trainer/settings/config.h"
#include "trainer/trainer.h"
#include "tests/trainer/valid_settings.h"

namespace tr = normsweep::trainer;

namespace {

class StepTimes : public tr::EventSink {
 public:
  void OnStep(const tr::StepEvent& e) override { tokens_per_s.push_back(e.tokens_per_s); }
  void OnEval(const tr::EvalEvent&) override {}
  void OnGradNorms(const tr::GradNormsEvent&) override {}
  void OnFinal(const tr::FinalEvent&) override {}
  std::vector<double> tokens_per_s;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "normsweep-gpu-bench: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags = {
      {"device", "cuda:0"}, {"precision", "fp32"}, {"placement", "pre"}, {"layers", "6"},
      {"d-model", "128"},   {"heads", "4"},        {"d-ff", ""},         {"seq-len", "64"},
      {"batch-size", "32"}, {"steps", "60"},       {"warmup", "10"},     {"threads", "1"}};
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    if (name.rfind("--", 0) != 0 || !flags.count(name.substr(2)) || i + 1 >= argc) {
      return Fail("unknown flag or missing value: " + name);
    }
    flags[name.substr(2)] = argv[i + 1];
  }
  auto integer = [&](const char* name) { return std::atoi(flags[name].c_str()); };
  tr::TrainSettings s;
  auto placement = tr::ParsePlacement(flags["placement"]);
  auto precision = tr::ParsePrecision(flags["precision"]);
  if (!placement.ok()) return Fail(placement.status().message());
  if (!precision.ok()) return Fail(precision.status().message());
  s.model.placement = *placement;
  s.model.layers = integer("layers");
  s.model.d_model = integer("d-model");
  s.model.heads = integer("heads");
  s.model.d_ff = flags["d-ff"].empty() ? tr::kFfnPerDModel * s.model.d_model : integer("d-ff");
  s.model.seq_len = integer("seq-len");
  s.batch_size = integer("batch-size");
  s.steps = integer("steps");
  s.schedule.peak_lr = 1e-3;
  s.schedule.warmup_steps = s.steps;
  s.schedule.total_steps = s.steps;
  s.eval_every = 0;
  s.eval_batches = 1;
  s.device = flags["device"];
  s.precision = *precision;
  s.threads = integer("threads");
  // Above any loss a healthy run reaches, so timing is never cut short.
  s.divergence_loss = 1e9;
  const int warmup = integer("warmup");
  if (const tr::Status st = tr::ValidateTrainSettings(s); !st.ok()) return Fail(st.message());
  if (warmup < 1 || warmup >= s.steps) return Fail("--warmup: must be in [1, steps)");

  StepTimes times;
  const tr::FinalEvent final = tr::RunTraining(Valid(s), tr::RunOptions{}, times);
  if (final.outcome != tr::Outcome::kSucceeded) return Fail(std::string("run ") + tr::OutcomeName(final.outcome) + ": " + final.error);
  std::vector<double> timed(times.tokens_per_s.begin() + warmup, times.tokens_per_s.end());
  std::sort(timed.begin(), timed.end());
  const double median = timed[timed.size() / 2];
  std::printf(
      "{\"backend\": \"%s\", \"precision\": \"%s\", \"parameters\": %lld, \"timed_steps\": %zu, "
      "\"median_step_tokens_per_s\": %.1f, \"final_train_loss\": %.6f}\n",
      final.backend.c_str(), final.precision.c_str(), static_cast<long long>(final.parameters), timed.size(), median,
      final.final_train_loss.value_or(0.0));
  return 0;
}
