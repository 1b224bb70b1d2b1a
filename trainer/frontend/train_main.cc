// normsweep-train: one Transformer training run, or a checkpoint check.
//
//   normsweep-train train [--config FILE.json] [flags]     events as JSON lines
//   normsweep-train eval  --checkpoint C --data F          {"loss":..,"tokens":..}
//   normsweep-train grads --checkpoint C --data F --batch-size B --out G
//   normsweep-train --list-devices
//
// Exit status: 0 when the run ended (SUCCEEDED, DIVERGED or CANCELLED: the
// final event says which), 1 when it FAILED, 2 for bad usage or config.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/quote.h"
#include "normsweep/v1/train.pb.h"
#include "trainer/cpu/blas.h"
#include "trainer/cpu/kernel_variant.h"
#include "trainer/backend.h"
#include "trainer/inspect.h"
#include "trainer/frontend/json_event_sink.h"
#include "trainer/probes.h"
#include "trainer/settings/schemes.h"
#include "proto/schema/train_config.h"
#include "trainer/trainer.h"

namespace {

using normsweep::v1::TrainConfig;
namespace tr = normsweep::trainer;
namespace schema = normsweep::schema;


// --help, its scheme lists ({titles}, {placements}, {placement_list}) from
// the scheme table (trainer/settings/schemes.h).
constexpr char kUsage[] = R"(normsweep-train: train one decoder-only Transformer LM
({titles}; QK-norm, z-loss and RMSNorm as switches).

Usage:
  normsweep-train train [--config FILE.json] [flags]
  normsweep-train eval  --checkpoint FILE --data FILE [--batch-size B] [--threads N]
  normsweep-train grads --checkpoint FILE --data FILE --batch-size B --out FILE [--threads N]
  normsweep-train probe hidden-norms|ln-jacobian|grad-norms [flags]
  normsweep-train --list-devices
  normsweep-train --help

train writes one JSON line per event (normsweep.v1.TrainEvent) to --events
(default stdout): "eval" at step 0 (before the first update: l0) unless
resuming, "step" every step, "eval" every --eval-every steps and at the end,
each with the instability diagnostics (per layer the largest attention
logit and the update-to-weight RMS ratios, and the output logits' log Z),
"grad_norms" (FFN W1/W2 gradient norms per layer) at initialization (step 0)
and at every evaluation step, and "final" with the outcome SUCCEEDED,
DIVERGED, FAILED or CANCELLED (and init_val_loss, l0, and unigram_loss, the
data's unigram loss: a final val loss within 0.1 of it is the plateau).
Flags override the --config file (protobuf JSON of normsweep.v1.TrainConfig).
--no-diagnostics drops the step-0 evaluation, the diagnostics and the later
grad_norms events (only for measuring what they cost).

Model:     --placement {placements}  --mix-post-fraction A
           --qk-norm  --norm layernorm|rmsnorm  --layers N  --d-model N  --heads N  --d-ff N
           --seq-len N  --dropout P  --positions sinusoidal|learned
Training:  --batch-size N  --steps N  --optimizer adam|adamw|radam|sgd  --lr LR
           --beta1 B  --beta2 B  --eps E  --weight-decay W  --momentum M
           --grad-clip NORM (0 = off)  --warmup-steps W  --z-loss C (0 = off)
           --schedule constant|inverse_sqrt|linear|cosine
Data:      --task translate | --data FILE   --eval-every N  --eval-batches N  --seed S
Stopping:  --divergence-loss L  --divergence-patience N
Runtime:   --threads N  --device cpu|cuda:N  --precision fp32|tf32|bf16  --events FILE  --checkpoint-out FILE
           --checkpoint-every N  --resume FILE  --print-config  --no-diagnostics

Probes of the paper's evidence at initialization (Xiong et al. 2020), each
printing a table:
  probe hidden-norms  [--d 512] [--tokens 8] [--layers 12] [--draws 20] [--seed 0]
                      [--placements post,pre] [--weight-scale 1]
      ||x||^2/d per layer, a column per placement
      ({placement_list}): Post-LN's and DeepNorm's pre-normalisation
      sum x^{post,5} (theory alpha^2 + beta^4/2: 3/2 for Post-LN), the
      residual stream of Pre-LN (between 1 + l/2 and 1 + 3l/2), Peri-LN
      (1 + 2l) and Mix-LN; --weight-scale multiplies every weight
  probe ln-jacobian   [--d 256] [--seed 0]
      spectral norm of LayerNorm's Jacobian at x = k z, k = 1, 2, 4, 8, beside sqrt(d)/||x||
  probe grad-norms    [--layers 6] [--d-model 128] [--heads 4] [--d-ff 4*d-model] [--seq-len 64]
                      [--batch-size 32] [--seeds 10] [--depths 6,8,10,12,14]
                      [--data FILE] [--threads N] [--placements post,pre]
      FFN W1/W2 gradient norms per layer at initialization, a column pair per
      placement, and the last layer's W2 gradient norm by depth
)";

std::string Usage() {
  std::string titles, placements;
  for (const tr::SchemeInfo& scheme : tr::Schemes()) {
    titles += (titles.empty() ? "" : &scheme == &tr::Schemes().back() ? " or " : ", ") + std::string(scheme.title);
    placements += (placements.empty() ? "" : "|") + std::string(scheme.name);
  }
  for (const tr::SchemeInfo& scheme : tr::Schemes()) {
    if (scheme.alias != nullptr) placements += std::string(" (") + scheme.alias + " = " + scheme.name + ")";
  }
  std::string out = kUsage;
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"{titles}", titles},
                                   {"{placements}", placements},
                                   {"{placement_list}", tr::SchemeNames(", ", ", ")}}) {
    out.replace(out.find(key), key.size(), value);
  }
  return out;
}

// normsweep-train MODE [NAME] [flags]: positional[0] is the mode, positional[1]
// the probe's name.
struct Args {
  std::string mode;
  std::string submode;
  std::map<std::string, std::string> flags;
  std::vector<std::string> order;
};

bool ParseArgs(int argc, char** argv, Args* args, std::string* error) {
  normsweep::CliArgs cli;
  if (!normsweep::ParseCliArgs(argc, argv, {"help", "list-devices", "print-config", "no-diagnostics", "qk-norm"}, &cli, error)) {
    return false;
  }
  const size_t allowed = !cli.positional.empty() && cli.positional[0] == "probe" ? 2 : 1;
  if (cli.positional.size() > allowed) {
    *error = "unexpected argument '" + cli.positional[allowed] + "'";
    return false;
  }
  if (!cli.positional.empty()) args->mode = cli.positional[0];
  if (cli.positional.size() > 1) args->submode = cli.positional[1];
  args->flags = std::move(cli.flags);
  args->order = std::move(cli.order);
  return true;
}

using Setter = std::function<bool(TrainConfig&, const std::string&)>;

Setter Int(void (TrainConfig::*set)(int32_t)) {
  return [set](TrainConfig& c, const std::string& v) {
    int32_t x;
    if (!absl::SimpleAtoi(v, &x)) return false;
    (c.*set)(x);
    return true;
  };
}
Setter Double(void (TrainConfig::*set)(double)) {
  return [set](TrainConfig& c, const std::string& v) {
    double x;
    if (!absl::SimpleAtod(v, &x)) return false;
    (c.*set)(x);
    return true;
  };
}
template <typename F>
Setter String(F set) {
  return [set](TrainConfig& c, const std::string& v) {
    (c.*set)(v);
    return true;
  };
}

const std::map<std::string, Setter>& ConfigFlags() {
  using C = TrainConfig;
  using S = void (C::*)(const std::string&);
  static const auto* flags = new std::map<std::string, Setter>{
      {"placement", String(static_cast<S>(&C::set_placement))},
      {"layers", Int(&C::set_layers)},
      {"d-model", Int(&C::set_d_model)},
      {"heads", Int(&C::set_heads)},
      {"d-ff", Int(&C::set_d_ff)},
      {"seq-len", Int(&C::set_seq_len)},
      {"dropout", Double(&C::set_dropout)},
      {"positions", String(static_cast<S>(&C::set_positions))},
      {"mix-post-fraction", Double(&C::set_mix_post_fraction)},
      {"qk-norm", [](C& c, const std::string&) {  // a switch: present means on
         c.set_qk_norm(true);
         return true;
       }},
      {"norm", String(static_cast<S>(&C::set_norm))},
      {"z-loss", Double(&C::set_z_loss)},
      {"batch-size", Int(&C::set_batch_size)},
      {"steps", Int(&C::set_steps)},
      {"optimizer", String(static_cast<S>(&C::set_optimizer))},
      {"lr", Double(&C::set_lr)},
      {"beta1", Double(&C::set_beta1)},
      {"beta2", Double(&C::set_beta2)},
      {"eps", Double(&C::set_eps)},
      {"weight-decay", Double(&C::set_weight_decay)},
      {"momentum", Double(&C::set_momentum)},
      {"grad-clip", Double(&C::set_grad_clip)},
      {"warmup-steps", Int(&C::set_warmup_steps)},
      {"schedule", String(static_cast<S>(&C::set_schedule))},
      {"task", String(static_cast<S>(&C::set_task))},
      {"data", String(static_cast<S>(&C::set_data_file))},
      {"eval-every", Int(&C::set_eval_every)},
      {"eval-batches", Int(&C::set_eval_batches)},
      {"seed", Int(&C::set_seed)},
      {"divergence-loss", Double(&C::set_divergence_loss)},
      {"divergence-patience", Int(&C::set_divergence_patience)},
      {"threads", Int(&C::set_threads)},
      {"device", String(static_cast<S>(&C::set_device))},
      {"precision", String(static_cast<S>(&C::set_precision))},
      {"checkpoint-every", Int(&C::set_checkpoint_every)},
  };
  return *flags;
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "normsweep-train: %s\n(run normsweep-train --help for usage)\n", message.c_str());
  return 2;
}

bool ReadText(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// Cancel flags, one per trial of the run (a solo run has one): SIGTERM and
// SIGINT set them all; in a fused run a line "cancel I" on stdin sets trial
// I's. Never freed: the detached stdin reader and a late signal may still
// write them while the process exits.
std::atomic<bool>* g_trial_cancel = nullptr;
size_t g_trials = 0;
void OnSignal(int) {
  for (size_t k = 0; k < g_trials; ++k) g_trial_cancel[k].store(true);
}

// Reads "cancel I" lines from stdin until EOF (other lines are ignored). Runs
// on a detached thread: a blocked read must not keep the process alive.
void ReadControlLines() {
  std::string pending;
  char buf[256];
  for (;;) {
    const ssize_t n = read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    pending.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
      const std::string line = pending.substr(0, nl);
      size_t k;
      if (line.rfind("cancel ", 0) == 0 && absl::SimpleAtoi(line.substr(7), &k) && k < g_trials) {
        g_trial_cancel[k].store(true);
      }
    }
    if (pending.size() > 4096) pending.clear();  // no newline in sight: not a control line
  }
}

// Why a fused run's trials cannot run together ("" when they can): settings
// that differ where fused trials must agree, or two trials writing one
// checkpoint, which would overwrite each other.
std::string FusedRunRefusal(const std::vector<tr::ValidTrainSettings>& valid,
                            const std::vector<std::string>& checkpoint_out) {
  std::vector<tr::TrainSettings> settings;
  for (const tr::ValidTrainSettings& v : valid) settings.push_back(v.get());
  if (tr::Status fusable = tr::CheckFusable(settings); !fusable.ok()) return fusable.message();
  for (size_t a = 0; a < checkpoint_out.size(); ++a) {
    for (size_t b = a + 1; b < checkpoint_out.size(); ++b) {
      if (!checkpoint_out[a].empty() && checkpoint_out[a] == checkpoint_out[b]) {
        return "--checkpoint-out: trials " + std::to_string(a) + " and " + std::to_string(b) + " have the same path " +
               normsweep::QuoteForError(checkpoint_out[a]) + " (each trial needs its own, or an empty one for none)";
      }
    }
  }
  return "";
}

int Train(const Args& args) {
  static const char* kRunFlags[] = {"config", "events", "checkpoint-out", "resume", "print-config", "no-diagnostics"};
  // Several comma-separated configs: one fused run of their trials.
  std::vector<std::string> config_paths = {""};
  if (auto it = args.flags.find("config"); it != args.flags.end()) {
    config_paths = absl::StrSplit(it->second, ',');
  }
  const size_t K = config_paths.size();
  if (K > static_cast<size_t>(tr::kMaxFusedTrials)) {
    return UsageError("--config: " + std::to_string(K) + " configs; a fused run takes at most " +
                      std::to_string(tr::kMaxFusedTrials));
  }
  // --checkpoint-out and --resume of a fused run: K comma-separated paths
  // (an empty one: none for that trial).
  auto per_trial = [&](const char* flag, std::vector<std::string>* out, std::string* error) {
    out->assign(K, "");
    auto it = args.flags.find(flag);
    if (it == args.flags.end()) return true;
    if (K == 1) {
      (*out)[0] = it->second;
      return true;
    }
    std::vector<std::string> parts = absl::StrSplit(it->second, ',');
    if (parts.size() != K) {
      *error = std::string("--") + flag + ": " + std::to_string(parts.size()) + " paths for " + std::to_string(K) +
               " configs (give one per config, in order; an empty one for none)";
      return false;
    }
    *out = std::move(parts);
    return true;
  };
  std::vector<std::string> checkpoint_out, resume;
  std::string error;
  if (!per_trial("checkpoint-out", &checkpoint_out, &error) || !per_trial("resume", &resume, &error)) {
    return UsageError(error);
  }
  std::vector<TrainConfig> configs(K);
  for (size_t k = 0; k < K; ++k) {
    const std::string& path = config_paths[k];
    if (K > 1 && path.empty()) return UsageError("--config: an empty path in the list");
    if (!path.empty()) {
      std::string text;
      if (!ReadText(path, &text)) return UsageError("--config: cannot read '" + path + "'");
      auto parsed = schema::TrainConfigFromJson(text);
      if (!parsed.ok()) return UsageError("--config '" + path + "': " + std::string(parsed.status().message()));
      configs[k] = *parsed;
    }
    for (const std::string& name : args.order) {
      bool run_flag = false;
      for (const char* f : kRunFlags) run_flag |= name == f;
      if (run_flag) continue;
      auto it = ConfigFlags().find(name);
      if (it == ConfigFlags().end()) return UsageError("unknown flag --" + name);
      if (!it->second(configs[k], args.flags.at(name))) {
        return UsageError("--" + name + ": invalid value '" + args.flags.at(name) + "'");
      }
    }
  }
  // A refusal of the run as a whole (configs that cannot be fused, a shared
  // checkpoint path) comes before --events is opened ("w" empties the file)
  // and leaves an existing events file as it was; a config the settings
  // refuse is its trial's FAILED final event, written to --events.
  std::vector<tr::ValidTrainSettings> valid;  // validated here, once
  size_t bad_config = K;  // the config whose settings are refused, if any
  std::string settings_error;
  for (size_t k = 0; k < K && bad_config == K; ++k) {
    auto s = schema::SettingsFromProto(configs[k]);
    if (!s.ok()) {
      bad_config = k;
      settings_error =
          (K > 1 ? "config " + std::to_string(k) + ": " : std::string()) + std::string(s.status().message());
    } else {
      valid.push_back(std::move(*s));
    }
  }
  if (bad_config == K && K > 1) {
    if (const std::string refusal = FusedRunRefusal(valid, checkpoint_out); !refusal.empty()) {
      return UsageError(refusal);
    }
  }
  std::FILE* events = stdout;
  if (auto it = args.flags.find("events"); it != args.flags.end() && it->second != "-") {
    events = std::fopen(it->second.c_str(), "w");
    if (events == nullptr) return UsageError("--events: cannot open '" + it->second + "' for writing");
  }
  std::vector<std::unique_ptr<tr::JsonLinesEventSink>> sinks;
  for (size_t k = 0; k < K; ++k) {
    sinks.push_back(std::make_unique<tr::JsonLinesEventSink>(events, K > 1 ? static_cast<int>(k) : -1));
  }
  if (bad_config != K) {
    // The worker reads a refused config as this trial's FAILED final event.
    tr::FinalEvent f;
    f.outcome = tr::Outcome::kFailed;
    f.error = settings_error;
    sinks[bad_config]->OnFinal(f);
    return UsageError(f.error);
  }
  if (args.flags.count("print-config")) {
    for (const TrainConfig& c : configs) std::printf("%s\n", schema::TrainConfigToJson(*schema::ResolvedTrainConfig(c)).c_str());
    return 0;
  }
  g_trial_cancel = new std::atomic<bool>[K]();
  g_trials = K;
  std::vector<tr::FusedTrial> trials;
  for (size_t k = 0; k < K; ++k) {
    trials.push_back({valid[k], {}, sinks[k].get()});
    tr::RunOptions& options = trials[k].options;
    options.checkpoint_out = checkpoint_out[k];
    options.resume_from = resume[k];
    options.cancel = &g_trial_cancel[k];
    options.diagnostics = !args.flags.count("no-diagnostics");
    options.checkpoint_metadata["config"] = schema::TrainConfigToJson(*schema::ResolvedTrainConfig(configs[k]));
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  // Only a fused run reads stdin: a solo run in the background of a shell
  // would stop on SIGTTIN, and in a pipeline it would eat its parent's input.
  if (K > 1) std::thread(ReadControlLines).detach();
  if (valid[0]->device.rfind("cpu", 0) == 0) {
    // Which kernels and matrix product run (the final event's "kernels"):
    // what explains a slow trial first.
    std::fprintf(stderr, "normsweep-train: cpu kernels %s, gemm %s\n",
                 tr::cpu::KernelVariantName(tr::cpu::ActiveKernelVariant()), tr::cpu::GemmDescription().c_str());
  }
  std::vector<tr::FinalEvent> finals;
  if (K == 1) {
    finals.push_back(tr::RunTraining(valid[0], trials[0].options, *sinks[0]));
  } else {
    finals = tr::RunFusedTraining(trials);
  }
  if (events != stdout) std::fclose(events);
  int rc = 0;
  for (size_t k = 0; k < K; ++k) {
    if (finals[k].outcome != tr::Outcome::kFailed) continue;
    std::fprintf(stderr, "normsweep-train: %sFAILED: %s\n", K > 1 ? ("trial " + std::to_string(k) + " ").c_str() : "",
                 finals[k].error.c_str());
    rc = 1;
  }
  return rc;
}

int Inspect(const Args& args) {
  const bool grads = args.mode == "grads";
  tr::InspectOptions o;
  for (const auto& [name, value] : args.flags) {
    if (name == "checkpoint") {
      o.checkpoint = value;
    } else if (name == "data") {
      o.data_file = value;
    } else if (name == "out" && grads) {
      o.out = value;
    } else if (name == "device") {
      o.device = value;
    } else if (name == "batch-size" || name == "threads") {
      int32_t x;
      if (!absl::SimpleAtoi(value, &x) || x < 1) return UsageError("--" + name + ": invalid value '" + value + "'");
      (name == "threads" ? o.threads : o.batch_size) = x;
    } else {
      return UsageError("unknown flag --" + name + " for " + args.mode);
    }
  }
  if (o.checkpoint.empty()) return UsageError("--checkpoint is required");
  if (o.data_file.empty()) return UsageError("--data is required");
  if (grads && !args.flags.count("batch-size")) return UsageError("--batch-size is required");
  if (grads && o.out.empty()) return UsageError("--out is required");
  auto result = grads ? tr::WriteCheckpointGradients(o) : tr::EvaluateCheckpoint(o);
  if (!result.ok()) {
    std::fprintf(stderr, "normsweep-train %s: %s\n", args.mode.c_str(), result.status().message().c_str());
    return result.status().code() == tr::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::printf("{\"loss\":%.9g,\"tokens\":%lld,\"windows\":%lld}\n", result->loss,
              static_cast<long long>(result->tokens), static_cast<long long>(result->windows));
  return 0;
}

std::vector<int> ParseIntList(const std::string& s, bool* ok) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  *ok = true;
  while (std::getline(ss, item, ',')) {
    int32_t x;
    if (!absl::SimpleAtoi(item, &x)) *ok = false;
    out.push_back(x);
  }
  *ok = *ok && !out.empty();
  return out;
}

int Probe(const Args& args) {
  std::map<std::string, int> ints;
  std::string data_file, depths = "6,8,10,12,14", placements = "post,pre", weight_scale;
  for (const auto& [name, value] : args.flags) {
    if (name == "data") {
      data_file = value;
    } else if (name == "depths") {
      depths = value;
    } else if (name == "placements" && args.submode != "ln-jacobian") {
      placements = value;
    } else if (name == "weight-scale" && args.submode == "hidden-norms") {
      weight_scale = value;
    } else {
      int32_t x;
      if (!absl::SimpleAtoi(value, &x)) return UsageError("--" + name + ": invalid value '" + value + "'");
      ints[name] = x;
    }
  }
  auto take = [&](const char* name, int def) {
    auto it = ints.find(name);
    if (it == ints.end()) return def;
    const int v = it->second;
    ints.erase(it);
    return v;
  };
  auto leftover = [&]() -> std::string { return ints.empty() ? "" : ints.begin()->first; };
  auto placement_list = tr::ParsePlacementList(placements);
  if (!placement_list.ok()) return UsageError(placement_list.status().message());
  if (args.submode == "hidden-norms") {
    tr::HiddenNormsOptions o;
    o.d = take("d", o.d);
    o.tokens = take("tokens", o.tokens);
    o.layers = take("layers", o.layers);
    o.draws = take("draws", o.draws);
    o.seed = static_cast<uint64_t>(take("seed", 0));
    o.placements = *placement_list;
    if (!weight_scale.empty() && (!absl::SimpleAtod(weight_scale, &o.weight_scale) || !(o.weight_scale > 0) ||
                                  !std::isfinite(o.weight_scale))) {
      return UsageError("--weight-scale: expected a positive number, got '" + weight_scale + "'");
    }
    if (!leftover().empty()) return UsageError("unknown flag --" + leftover() + " for probe hidden-norms");
    std::vector<int> report;
    for (int l : o.report_layers) if (l <= o.layers) report.push_back(l);
    if (report.empty() || report.back() != o.layers) report.push_back(o.layers);
    o.report_layers = report;
    auto rows = tr::ProbeHiddenNorms(o);
    if (!rows.ok()) return UsageError(rows.status().message());
    std::fputs(tr::HiddenNormsTable(o, *rows).c_str(), stdout);
    return 0;
  }
  if (args.submode == "ln-jacobian") {
    tr::LnJacobianOptions o;
    o.d = take("d", o.d);
    o.seed = static_cast<uint64_t>(take("seed", 0));
    if (!leftover().empty()) return UsageError("unknown flag --" + leftover() + " for probe ln-jacobian");
    auto rows = tr::ProbeLnJacobian(o);
    if (!rows.ok()) return UsageError(rows.status().message());
    std::printf("LayerNorm Jacobian at x = k z, d=%d (gain 1, bias 0, eps 1e-5)\n", o.d);
    std::printf("%-4s %-16s %-14s %s\n", "k", "||J_LN(x)||_2", "sqrt(d)/||x||", "ratio");
    for (const auto& r : *rows) {
      std::printf("%-4g %-16.4f %-14.4f %.4f\n", r.k, r.spectral_norm, r.sqrt_d_over_norm,
                  r.spectral_norm / r.sqrt_d_over_norm);
    }
    return 0;
  }
  if (args.submode == "grad-norms") {
    tr::GradNormsOptions o;
    o.model.layers = take("layers", 6);
    o.model.d_model = take("d-model", 128);
    o.model.heads = take("heads", 4);
    o.model.d_ff = take("d-ff", tr::kFfnPerDModel * o.model.d_model);
    o.model.seq_len = take("seq-len", 64);
    o.batch_size = take("batch-size", 32);
    o.seeds = take("seeds", 10);
    o.threads = take("threads", 1);
    o.data_file = data_file;
    o.placements = *placement_list;
    bool ok;
    o.depths = ParseIntList(depths, &ok);
    if (!ok) return UsageError("--depths: expected a comma-separated list of layer counts, got '" + depths + "'");
    if (!leftover().empty()) return UsageError("unknown flag --" + leftover() + " for probe grad-norms");
    auto r = tr::ProbeGradNorms(o);
    if (!r.ok()) return UsageError(r.status().message());
    std::fputs(tr::GradNormsTable(o, *r).c_str(), stdout);
    return 0;
  }
  return UsageError(args.submode.empty() ? "probe: name one of hidden-norms, ln-jacobian, grad-norms"
                                         : "probe: unknown probe '" + args.submode + "'");
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything reads OpenBLAS's choice: may execute this program again.
  tr::cpu::UseOpenBlasCoreOfTheKernelVariant(argv);
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, &args, &error)) return UsageError(error);
  if (args.flags.count("help") || (args.mode.empty() && args.flags.empty())) {
    std::fputs(Usage().c_str(), stdout);
    return 0;
  }
  if (args.flags.count("list-devices")) {
    for (const std::string& d : tr::ListDevices()) std::printf("%s\n", d.c_str());
    return 0;
  }
  try {
    if (args.mode == "train") return Train(args);
    if (args.mode == "eval" || args.mode == "grads") return Inspect(args);
    if (args.mode == "probe") return Probe(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "normsweep-train: FAILED: %s\n", e.what());
    return 1;
  }
  return UsageError(args.mode.empty() ? "missing mode (train, eval, grads or probe)" : "unknown mode '" + args.mode + "'");
}
