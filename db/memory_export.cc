// MemoryStore::ExportSweep: the same rows, columns and cursor as
// PostgresStore's (db/pg_export.cc), from the maps. A row's x is the seq_ of
// its last write; every write happens under mu_, so the horizon is simply
// the next number, and a sweep final when a pass reads it has nothing more
// to come. Each pass copies its rows under mu_, then sends them unlocked
// (memory is not bounded here: MemoryStore is for tests and small runs).
#include <algorithm>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/memory_store.h"

namespace normsweep::db {
namespace {

struct GradNorm {
  double norm = 0;
};
using Payload = std::variant<v1::Trial, v1::MetricPoint, GradNorm, v1::LayerDiagnostics, v1::TrialAttempt>;

bool Add(ExportChunkBuilder& out, const ExportKey& key, const Payload& p) {
  switch (p.index()) {
    case 0: return out.AddTrial(key, std::get<0>(p));
    case 1: return out.AddMetric(key, std::get<1>(p));
    case 2: return out.AddGradNorm(key, std::get<2>(p).norm);
    case 3: return out.AddDiagnostics(key, std::get<3>(p));
    default: return out.AddAttempt(key, std::get<4>(p));
  }
}

}  // namespace

absl::Status MemoryStore::ExportSweep(const ExportPlan& plan, const ExportOptions& options,
                                      const ExportCallbacks& callbacks) {
  {
    absl::MutexLock lock(&mu_);
    if (!sweeps_.contains(plan.sweep_id)) return NoSweep(plan.sweep_id);
  }
  auto pass = [&](const ExportKey& since, ExportChunkBuilder& out) -> absl::StatusOr<ExportPassResult> {
    std::vector<std::pair<ExportKey, Payload>> rows;
    ExportPassResult result;
    {
      absl::MutexLock lock(&mu_);
      result.end = ExportKey{seq_ + 1, 0, 0, 0};
      result.complete = sweeps_.at(plan.sweep_id).sweep.state() != v1::SWEEP_RUNNING;
      const int table = static_cast<int>(plan.table);
      auto seq_of = [&](int64_t trial, int32_t step, int32_t layer) {
        auto it = export_seq_.find({table, trial, step, layer});
        return it == export_seq_.end() ? int64_t{0} : it->second;
      };
      auto keep = [&](ExportKey key, Payload p) {
        if (key > since) rows.emplace_back(key, std::move(p));
      };
      for (const auto& [id, st] : trials_) {
        if (st.trial.sweep_id() != plan.sweep_id) continue;
        switch (plan.table) {
          case ExportTable::kTrials:
            keep({st.seq, id, 0, 0}, st.trial);
            break;
          case ExportTable::kMetrics:
            for (auto it = metrics_.lower_bound({id, INT32_MIN}); it != metrics_.end() && it->first.first == id; ++it) {
              keep({seq_of(id, it->first.second, 0), id, it->first.second, 0}, it->second);
            }
            break;
          case ExportTable::kGradNorms:
            // A layer's matrices share its last write's seq.
            for (auto it = grad_norms_.lower_bound({id, INT32_MIN, INT32_MIN, ""});
                 it != grad_norms_.end() && std::get<0>(it->first) == id; ++it) {
              const auto& [trial, step, layer, matrix] = it->first;
              keep({seq_of(id, step, layer), id, step, layer, matrix}, GradNorm{it->second});
            }
            break;
          case ExportTable::kDiagnostics:
            for (auto it = diagnostics_.lower_bound({id, INT32_MIN, INT32_MIN});
                 it != diagnostics_.end() && std::get<0>(it->first) == id; ++it) {
              const auto& [trial, step, layer] = it->first;
              keep({seq_of(id, step, layer), id, step, layer}, it->second);
            }
            break;
          case ExportTable::kAttempts: {
            int32_t last_recorded = 0;
            for (auto it = attempts_.lower_bound({id, INT32_MIN}); it != attempts_.end() && it->first.first == id;
                 ++it) {
              keep({seq_of(id, it->first.second, 0), id, it->first.second, 0}, it->second);
              last_recorded = it->first.second;
            }
            // The attempt that finished the trial, as GetTrial lists it.
            if (std::optional<v1::TrialAttempt> last = FinishingAttempt(st.trial, last_recorded)) {
              keep({st.seq, id, last->attempt(), 0}, *std::move(last));
            }
            break;
          }
        }
      }
    }
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, payload] : rows) {
      if (callbacks.cancelled() || !Add(out, key, payload)) {
        return absl::CancelledError("ExportSweep: the client went away");
      }
    }
    return result;
  };
  return RunExport(plan, options, callbacks, pass);
}

}  // namespace normsweep::db
