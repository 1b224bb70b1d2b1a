// A stand-in for normsweep-train in the worker's tests: same command line
// (train --config FILE [--events -]) and the same JSON-line events, with a
// behaviour scripted in the config's `task` field, e.g.
// "mode=ok,step_ms=10". Modes:
//   ok           every step, evals, final SUCCEEDED (SIGTERM: final CANCELLED)
//   diverge      final DIVERGED at the last step
//   crash        after crash_at steps: a message on stderr, exit status 3,
//                no final event
//   segv         after crash_at steps: killed by SIGSEGV
//   sigkill      after crash_at steps: killed by SIGKILL, as by kill -9
//   oom          after crash_at steps: adds one to the oom_kill count of the
//                memory.events file memory_events=PATH, then SIGKILL, as
//                the OOM killer does
//   hang         after crash_at steps: silent until signalled (SIGTERM
//                still ends it with a final CANCELLED event)
//   ignore_term  like ok, but ignores SIGTERM (only SIGKILL stops it)
//   linger       like ok, then stays alive after its final event, ignoring
//                SIGTERM
// pidfile=PATH writes the process id there first; end_ms=N waits N ms after
// the last step before the final event (a long final evaluation).
// diag=1 prints what the trainer prints since issue 16: an evaluation at
// step 0 (val_loss l0), log Z and per-block diagnostics (diag_layers blocks,
// default the config's layers) on every evaluation, grad_norms at every
// evaluation step, and init_val_loss in the final event (unless no_l0=1, as
// for a run resumed from a checkpoint). Its figures: l0 = 5.6, log Z at step
// s = 5.6 - s/1000, block l's largest attention logit 2 + l + s/100, its
// update ratios (k+1)(l+1)/1000 for qkv, proj, fc1, fc2 (k = 0..3).
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "proto/schema/train_config.h"
#include "tests/worker/train_events.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnTerm(int) { g_stop = 1; }

void Emit(const std::string& json) {
  std::fputs(json.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// memory.events with its oom_kill count one higher, as the kernel's OOM
// killer leaves it.
void BumpOomKills(const std::string& path) {
  std::ifstream in(path);
  std::string out, line;
  while (std::getline(in, line)) {
    int64_t n = 0;
    if (line.rfind("oom_kill ", 0) == 0 && absl::SimpleAtoi(line.substr(9), &n)) {
      line = "oom_kill " + std::to_string(n + 1);
    }
    out += line + "\n";
  }
  in.close();
  std::ofstream(path, std::ios::trunc) << out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--config") config_path = argv[i + 1];
  }
  std::ifstream in(config_path);
  if (!in) {
    std::fprintf(stderr, "fake-trainer: cannot read --config '%s'\n", config_path.c_str());
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto config = normsweep::schema::TrainConfigFromJson(text.str());
  if (!config.ok()) {
    std::fprintf(stderr, "fake-trainer: %s\n", config.status().ToString().c_str());
    return 2;
  }
  std::map<std::string, std::string> script;
  for (absl::string_view kv : absl::StrSplit(config->task(), ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    script[p.first] = p.second;
  }
  auto num = [&](const char* key, int def) {
    int v = def;
    if (script.count(key)) (void)absl::SimpleAtoi(script[key], &v);
    return v;
  };
  const std::string mode = script.count("mode") ? script["mode"] : "ok";
  const int steps = config->steps() > 0 ? config->steps() : 10;
  const int step_ms = num("step_ms", 5);
  const int crash_at = num("crash_at", 3);
  const int eval_every = config->eval_every();
  const int layers = config->layers() > 0 ? config->layers() : 2;
  const bool diag = num("diag", 0) != 0;
  const int diag_layers = num("diag_layers", layers);
  constexpr double kL0 = 5.6;
  if (script.count("pidfile")) std::ofstream(script["pidfile"]) << getpid() << "\n";
  if (mode == "ignore_term") {
    std::signal(SIGTERM, SIG_IGN);
  } else {
    std::signal(SIGTERM, OnTerm);
  }
  std::fprintf(stderr, "fake-trainer: mode %s, %d steps, threads %d, device %s\n", mode.c_str(), steps,
               config->threads(), config->device().c_str());

  namespace v1 = normsweep::v1;
  auto grad_norms = [&](int at) {
    Emit(normsweep::schema::TrainEventToJson(normsweep::testing::GradNormsEvent(
        at, layers, [&](int l, const std::string& m) { return 1.0 + l + (m[6] == '2' ? 0.5 : 0) + at / 1000.0; })));
  };
  auto add_diagnostics = [&](v1::TrainEvent& ev) {
    if (!diag) return;
    const int at = ev.step();
    ev.set_output_log_z(kL0 - at / 1000.0);
    for (int l = 0; l < diag_layers; ++l) {
      v1::LayerDiagnostics* d = ev.add_layer_diagnostics();
      d->set_layer(l);
      d->set_max_attn_logit(2.0 + l + at / 100.0);
      if (at == 0) continue;  // no update yet
      d->set_update_ratio_qkv(1 * (l + 1) / 1000.0);
      d->set_update_ratio_proj(2 * (l + 1) / 1000.0);
      d->set_update_ratio_fc1(3 * (l + 1) / 1000.0);
      d->set_update_ratio_fc2(4 * (l + 1) / 1000.0);
    }
  };
  grad_norms(0);
  if (diag) {
    v1::TrainEvent ev;
    ev.set_type("eval");
    ev.set_step(0);
    ev.set_val_loss(kL0);
    add_diagnostics(ev);
    Emit(normsweep::schema::TrainEventToJson(ev));
  }
  double loss = 5.5, best = 1e9, val = 0;
  int step = 0;
  for (step = 1; step <= steps; ++step) {
    if (g_stop) break;
    usleep(step_ms * 1000);
    loss = 5.5 * std::exp(-0.02 * step);
    v1::TrainEvent e;
    e.set_type("step");
    e.set_step(step);
    e.set_train_loss(loss);
    e.set_lr(config->lr() * std::min(1.0, step / std::max(1.0, 1.0 * config->warmup_steps())));
    e.set_grad_norm(1.0 / step);
    e.set_tokens_per_s(1000 + step);
    Emit(normsweep::schema::TrainEventToJson(e));
    if ((eval_every > 0 && step % eval_every == 0) || step == steps) {
      val = loss + 0.1;
      best = std::min(best, val);
      if (diag) grad_norms(step);
      v1::TrainEvent ev;
      ev.set_type("eval");
      ev.set_step(step);
      ev.set_val_loss(val);
      ev.set_val_accuracy(0.5);
      add_diagnostics(ev);
      Emit(normsweep::schema::TrainEventToJson(ev));
    }
    if (step == crash_at) {
      if (mode == "crash") {
        std::fprintf(stderr, "fake-trainer: simulated crash at step %d\n", step);
        return 3;
      }
      if (mode == "segv") {
        std::fflush(stderr);
        raise(SIGSEGV);
      }
      if (mode == "sigkill") raise(SIGKILL);
      if (mode == "oom") {
        BumpOomKills(script["memory_events"]);
        raise(SIGKILL);
      }
      if (mode == "hang") {
        while (!g_stop) pause();
      }
    }
  }
  if (!g_stop) usleep(num("end_ms", 0) * 1000);
  v1::TrainEvent f;
  f.set_type("final");
  f.set_step(std::min(step, steps));
  f.set_outcome(g_stop ? "CANCELLED" : mode == "diverge" ? "DIVERGED" : "SUCCEEDED");
  f.set_final_train_loss(loss);
  f.set_final_val_loss(val);
  f.set_best_val_loss(best);
  f.set_final_val_accuracy(0.5);
  f.set_mean_tokens_per_s(1234.5);
  if (mode == "diverge") f.set_diverged_step(steps);
  if (diag && num("no_l0", 0) == 0) f.set_init_val_loss(kL0);
  Emit(normsweep::schema::TrainEventToJson(f));
  if (mode == "linger") {
    std::signal(SIGTERM, SIG_IGN);
    sleep(100);
  }
  return 0;
}
