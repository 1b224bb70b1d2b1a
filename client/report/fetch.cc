#include "client/report/fetch.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/report/export_reader.h"
#include "client/report/figures.h"
#include "client/report/variant_view.h"
#include "common/status_macros.h"

namespace normsweep::client {
namespace {

// Every chunk of one table's export into reader.
absl::Status ReadTable(SweepClient& client, const v1::ExportSweepRequest& request, ExportReader& reader) {
  absl::Status read;
  absl::Status exported = client.Export(request, [&](const v1::ExportChunk& chunk) {
    read = reader.Add(request.table(), chunk);
    return read.ok();  // false: stop the export
  });
  if (!read.ok()) return read;
  if (!exported.ok()) {
    return absl::Status(exported.code(), absl::StrCat("export of ", request.table(), ": ", exported.message()));
  }
  return absl::OkStatus();
}

v1::ExportSweepRequest ExportOf(int64_t sweep_id, const std::string& table) {
  v1::ExportSweepRequest request;
  request.set_sweep_id(sweep_id);
  request.set_table(table);
  if (table == "metrics") {
    for (const char* field : kReportMetricFields) request.add_metrics(field);
  }
  return request;
}

// The trials whose diagnostics the page draws: two per placement and variant.
std::unordered_set<int64_t> PlottedTrials(const ReportData& data) {
  std::unordered_set<int64_t> plotted;
  for (const report::VariantView& v : report::Variants(data)) {
    for (const std::string& p : v.placements) {
      const report::DiagnosticPicks picks = report::PickDiagnosticTrials(v, p);
      for (const v1::GetTrialResponse* t : {picks.best, picks.first_failure}) {
        if (t != nullptr) plotted.insert(t->trial().id());
      }
    }
  }
  return plotted;
}

}  // namespace

absl::StatusOr<ReportData> FetchReportData(SweepClient& client, int64_t sweep_id, const FetchReportOptions& options) {
  ReportData data;
  ASSIGN_OR_RETURN(data.sweep, client.GetSweep(sweep_id));
  ExportReader reader(sweep_id);
  for (const char* table : {"trials", "metrics", "grad_norms"}) {
    RETURN_IF_ERROR(ReadTable(client, ExportOf(sweep_id, table), reader));
  }
  data.trials = reader.TakeTrials();
  ASSIGN_OR_RETURN(data.analysis, client.GetSweepAnalysis(sweep_id, kNearBestTolerance));
  // The picks depend on the trials' configs and results and on the
  // analysis, not on diagnostics: they are known before any is read.
  const std::unordered_set<int64_t> plotted = PlottedTrials(data);
  if (static_cast<int>(plotted.size()) <= options.max_diagnostics_get_trials) {
    std::unordered_map<int64_t, v1::GetTrialResponse*> by_id;
    for (v1::GetTrialResponse& t : data.trials) by_id[t.trial().id()] = &t;
    for (const int64_t id : plotted) {
      absl::StatusOr<v1::GetTrialResponse> full = client.GetTrial(id);
      if (!full.ok()) {
        return absl::Status(full.status().code(), absl::StrCat("trial ", id, ": ", full.status().message()));
      }
      by_id.at(id)->mutable_diagnostics()->Swap(full->mutable_diagnostics());
    }
  } else {
    ExportReader diagnostics(sweep_id);
    diagnostics.KeepDiagnosticsOf(plotted);
    RETURN_IF_ERROR(ReadTable(client, ExportOf(sweep_id, "diagnostics"), diagnostics));
    diagnostics.TakeRowsInto(data.trials);
  }
  return data;
}

}  // namespace normsweep::client
