#include "scheduler/cost_estimate.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/schema/boundary_search.h"
#include "proto/schema/train_config.h"
#include "scheduler/field_errors.h"
#include "trainer/settings/flops.h"

namespace normsweep::scheduler {
namespace {

// The median of values (the mean of the middle two for an even count); 0
// for none.
double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  return (upper + *std::max_element(values.begin(), values.begin() + mid)) / 2;
}

// "N threads" / "1 thread".
std::string Threads(int n) { return absl::StrCat(n, n == 1 ? " thread" : " threads"); }

// boundary_search: what the bisection may add to an estimate of the initial
// points alone (every line's trials share one config but for the lr, so the
// same share of FLOPs as of trials).
std::string BoundaryNote(const v1::SweepSpec& spec, size_t trials) {
  const schema::BoundarySettings b = schema::BoundarySettingsOf(spec.boundary_search());
  const int64_t bisections = MaxBoundaryTrialsPerLine(spec.boundary_search()) - b.initial_points;
  const int64_t lines = static_cast<int64_t>(trials) / b.initial_points;
  return absl::StrCat("boundary_search: these figures count the ", trials, " initial points (", b.initial_points,
                      " on each of ", lines, " lines); the bisection then adds up to ", bisections,
                      " trials per line (", bisections * lines, " in all, an upper bound: a line stops early when "
                      "its coarse points hold no boundary), up to ",
                      static_cast<int64_t>(std::lround(100.0 * bisections / b.initial_points)), "% more");
}

}  // namespace

SlotThroughput MeasureSlotThroughput(const std::vector<db::WorkerSpeeds>& speeds, int threads) {
  std::vector<double> per_worker;
  int trials = 0;
  for (const db::WorkerSpeeds& w : speeds) {
    std::vector<double> flops_per_s;
    for (const db::TrialSpeed& t : w.trials) {
      absl::StatusOr<trainer::ValidTrainSettings> s = schema::SettingsFromProto(t.config);
      if (!s.ok()) continue;
      flops_per_s.push_back(t.tokens_per_s * static_cast<double>(trainer::TrainingFlopsPerToken((*s)->model)));
    }
    if (flops_per_s.empty()) continue;
    trials += static_cast<int>(flops_per_s.size());
    per_worker.push_back(Median(std::move(flops_per_s)));
  }
  SlotThroughput out;
  if (!per_worker.empty()) {
    out.flops_per_s = Median(per_worker);
    out.measured = true;
    out.source = absl::StrCat("measured: ", trials, trials == 1 ? " trial" : " trials", " on ", per_worker.size(),
                              per_worker.size() == 1 ? " worker" : " workers", " (the median of each live worker's "
                              "last ", kThroughputTrialsPerWorker, " finished, then over workers)");
    return out;
  }
  out.flops_per_s = kAssumedFlopsPerSecondPerCore * threads;
  out.source = absl::StrCat("assumed: ", kAssumedFlopsPerSecondPerCore / 1e9, " GFLOP/s per core x ",
                            Threads(threads), ", no finished trials on a live worker (the trainer's CPU figure "
                            "in docs/performance.md)");
  return out;
}

double PackedSeconds(std::vector<double> job_seconds, int slots) {
  std::sort(job_seconds.begin(), job_seconds.end(), std::greater<>());
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;  // each slot's busy time, least on top
  for (int i = 0; i < slots; ++i) free_at.push(0);
  double end = 0;
  for (double s : job_seconds) {
    const double done = free_at.top() + s;
    free_at.pop();
    free_at.push(done);
    end = std::max(end, done);
  }
  return end;
}

absl::StatusOr<v1::CostEstimate> EstimateCost(const ValidSpec& valid, const std::vector<db::NewTrial>& trials,
                                              const std::vector<v1::Worker>& live_workers,
                                              const std::vector<db::WorkerSpeeds>& speeds) {
  std::vector<double> trial_flops;
  trial_flops.reserve(trials.size());
  double flops = 0;
  int64_t tokens = 0;
  int threads = 1;
  for (const db::NewTrial& t : trials) {
    absl::StatusOr<trainer::ValidTrainSettings> s = schema::SettingsFromProto(t.config);
    if (!s.ok()) return Within(absl::StrCat("spec: trial ", t.index), s.status());
    trial_flops.push_back(trainer::TrialFlops(s->get()));
    flops += trial_flops.back();
    tokens += trainer::TrainingTokens(s->get());
    threads = std::max(threads, (*s)->threads);  // one value: threads is no axis
  }
  const SlotThroughput throughput = MeasureSlotThroughput(speeds, threads);
  v1::CostEstimate e;
  e.set_flops(flops);
  e.set_training_tokens(tokens);
  e.set_flops_per_s_per_slot(throughput.flops_per_s);
  e.set_throughput_source(throughput.source);
  e.set_throughput_measured(throughput.measured);
  e.set_slot_hours(flops / throughput.flops_per_s / 3600);
  e.set_core_hours(e.slot_hours() * threads);
  int slots = 0;
  for (const v1::Worker& w : live_workers) slots += w.devices_size();
  e.set_slots(slots);
  if (slots > 0) {
    for (double& f : trial_flops) f /= throughput.flops_per_s;  // now seconds
    e.set_wall_seconds(PackedSeconds(std::move(trial_flops), slots));
  }
  if (valid.spec().has_boundary_search()) e.set_note(BoundaryNote(valid.spec(), trials.size()));
  return e;
}

}  // namespace normsweep::scheduler
