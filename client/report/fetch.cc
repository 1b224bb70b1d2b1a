#include "client/report/fetch.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/report/figures.h"
#include "client/report/variant_view.h"

namespace normsweep::client {

absl::StatusOr<ReportData> FetchReportData(SweepClient& client, int64_t sweep_id) {
  ReportData data;
  absl::StatusOr<v1::Sweep> sweep = client.GetSweep(sweep_id);
  if (!sweep.ok()) return sweep.status();
  data.sweep = *std::move(sweep);
  absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials(sweep_id);
  if (!trials.ok()) return trials.status();
  for (const v1::Trial& t : *trials) {
    absl::StatusOr<v1::GetTrialResponse> full = client.GetTrial(t.id());
    if (!full.ok()) {
      return absl::Status(full.status().code(), absl::StrCat("trial ", t.id(), ": ", full.status().message()));
    }
    data.trials.push_back(*std::move(full));
  }
  std::sort(data.trials.begin(), data.trials.end(),
            [](const auto& a, const auto& b) { return a.trial().index() < b.trial().index(); });
  absl::StatusOr<v1::GetSweepAnalysisResponse> analysis = client.GetSweepAnalysis(sweep_id, kNearBestTolerance);
  if (!analysis.ok()) return analysis.status();
  data.analysis = *std::move(analysis);
  // GetTrial returns every trial's diagnostics, but the page draws those of a
  // few (two per placement and variant): the others are not kept.
  std::set<int64_t> plotted;
  for (const report::VariantView& v : report::Variants(data)) {
    for (const std::string& p : v.placements) {
      const report::DiagnosticPicks picks = report::PickDiagnosticTrials(v, p);
      for (const v1::GetTrialResponse* t : {picks.best, picks.first_failure}) {
        if (t != nullptr) plotted.insert(t->trial().id());
      }
    }
  }
  for (v1::GetTrialResponse& t : data.trials) {
    if (!plotted.contains(t.trial().id())) t.clear_diagnostics();
  }
  return data;
}

}  // namespace normsweep::client
