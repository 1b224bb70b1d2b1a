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
// Fused (--config A,B,...: several configs, one run): every event carries
// its config's fused_index; the trials step in lockstep (the first config's
// step_ms), each with its own steps and mode: ok, diverge (final DIVERGED
// at crash_at, the others go on), crash / segv / sigkill (the whole
// process, at that trial's crash_at), ignore_cancel (like ok, but deaf to
// its `cancel I`). A stdin line `cancel I` ends trial I with a final
// CANCELLED event; SIGTERM ends every trial so; EOF on stdin is ignored.
// pidfile= of the first config applies.
// pidfile=PATH writes the process id there first; end_ms=N waits N ms after
// the last step before the final event (a long final evaluation).
// diag=1 prints what the trainer prints since issue 16: an evaluation at
// step 0 (val_loss l0), log Z and per-block diagnostics (diag_layers blocks,
// default the config's layers) on every evaluation, grad_norms at every
// evaluation step, and init_val_loss in the final event (unless no_l0=1, as
// for a run resumed from a checkpoint). Its figures: l0 = 5.6, log Z at step
// s = 5.6 - s/1000, block l's largest attention logit 2 + l + s/100, its
// update ratios (k+1)(l+1)/1000 for qkv, proj, fc1, fc2 (k = 0..3).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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


using Script = std::map<std::string, std::string>;

Script ParseScript(const std::string& task) {
  Script script;
  for (absl::string_view kv : absl::StrSplit(task, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    script[p.first] = p.second;
  }
  return script;
}

int Num(const Script& script, const char* key, int def) {
  int v = def;
  auto it = script.find(key);
  if (it != script.end()) (void)absl::SimpleAtoi(it->second, &v);
  return v;
}

// The trial indexes of the `cancel I` lines stdin holds now (non-blocking).
std::vector<int> ReadCancels(std::string* pending) {
  std::vector<int> out;
  char buf[256];
  while (true) {
    pollfd p{0, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) break;
    const ssize_t n = read(0, buf, sizeof(buf));
    if (n <= 0) break;  // EOF: ignored (no more cancels)
    pending->append(buf, n);
  }
  size_t nl;
  while ((nl = pending->find('\n')) != std::string::npos) {
    const std::string line = pending->substr(0, nl);
    pending->erase(0, nl + 1);
    int i = -1;
    if (line.rfind("cancel ", 0) == 0 && absl::SimpleAtoi(line.substr(7), &i)) out.push_back(i);
    std::fprintf(stderr, "fake-trainer: stdin '%s'\n", line.c_str());
  }
  return out;
}

int RunFused(const std::vector<std::string>& paths) {
  namespace v1 = normsweep::v1;
  struct Trial {
    v1::TrainConfig config;
    Script script;
    std::string mode;
    int steps = 10;
    int crash_at = 3;
    bool done = false;
    bool cancel = false;
    double loss = 5.5, best = 1e9, val = 0;
    int step = 0;
  };
  std::vector<Trial> trials;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    auto config = normsweep::schema::TrainConfigFromJson(text.str());
    if (!in || !config.ok()) {
      std::fprintf(stderr, "fake-trainer: cannot read --config item '%s'\n", path.c_str());
      return 2;
    }
    Trial t;
    t.config = *config;
    t.script = ParseScript(config->task());
    t.mode = t.script.count("mode") ? t.script["mode"] : "ok";
    t.steps = config->steps() > 0 ? config->steps() : 10;
    t.crash_at = Num(t.script, "crash_at", 3);
    trials.push_back(t);
  }
  if (trials[0].script.count("pidfile")) std::ofstream(trials[0].script["pidfile"]) << getpid() << "\n";
  std::signal(SIGTERM, OnTerm);
  const int step_ms = Num(trials[0].script, "step_ms", 5);
  std::fprintf(stderr, "fake-trainer: fused run of %zu trials\n", trials.size());
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  auto final_event = [&](int index, const char* outcome) {
    Trial& t = trials[index];
    v1::TrainEvent f;
    f.set_type("final");
    f.set_fused_index(index);
    f.set_step(t.step);
    f.set_outcome(outcome);
    f.set_final_train_loss(t.loss);
    f.set_final_val_loss(t.val);
    f.set_best_val_loss(t.best);
    f.set_final_val_accuracy(0.5);
    f.set_mean_tokens_per_s(1000.0 + index);
    if (std::string(outcome) == "DIVERGED") f.set_diverged_step(t.step);
    Emit(normsweep::schema::TrainEventToJson(f));
    t.done = true;
  };
  std::string pending;
  for (int step = 1;; ++step) {
    for (int i : ReadCancels(&pending)) {
      if (i >= 0 && i < static_cast<int>(trials.size()) && trials[i].mode != "ignore_cancel") trials[i].cancel = true;
    }
    bool any = false;
    for (size_t i = 0; i < trials.size(); ++i) {
      Trial& t = trials[i];
      if (t.done) continue;
      if (g_stop || t.cancel) {
        final_event(i, "CANCELLED");
        continue;
      }
      if (step > t.steps) {
        final_event(i, "SUCCEEDED");
        continue;
      }
      any = true;
    }
    if (!any) break;
    usleep(step_ms * 1000);
    for (size_t i = 0; i < trials.size(); ++i) {
      Trial& t = trials[i];
      if (t.done) continue;
      t.step = step;
      t.loss = 5.5 * std::exp(-0.02 * step) * (1.0 + 0.1 * i);
      v1::TrainEvent e;
      e.set_type("step");
      e.set_fused_index(i);
      e.set_step(step);
      e.set_train_loss(t.loss);
      e.set_lr(t.config.lr());
      e.set_grad_norm(1.0 / step);
      e.set_tokens_per_s(1000 + step);
      Emit(normsweep::schema::TrainEventToJson(e));
      const int eval_every = t.config.eval_every();
      if ((eval_every > 0 && step % eval_every == 0) || step == t.steps) {
        t.val = t.loss + 0.1;
        t.best = std::min(t.best, t.val);
        v1::TrainEvent ev;
        ev.set_type("eval");
        ev.set_fused_index(i);
        ev.set_step(step);
        ev.set_val_loss(t.val);
        ev.set_val_accuracy(0.5);
        Emit(normsweep::schema::TrainEventToJson(ev));
      }
      if (step != t.crash_at) continue;
      if (t.mode == "diverge") final_event(i, "DIVERGED");
      if (t.mode == "crash") {
        std::fprintf(stderr, "fake-trainer: simulated crash at step %d of fused trial %zu\n", step, i);
        return 3;
      }
      if (t.mode == "segv") {
        std::fflush(stderr);
        raise(SIGSEGV);
      }
      if (t.mode == "sigkill") raise(SIGKILL);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--config") config_path = argv[i + 1];
  }
  if (config_path.find(',') != std::string::npos) return RunFused(absl::StrSplit(config_path, ','));
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
