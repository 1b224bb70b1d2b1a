// The data of `normsweep report`, fetched over SweepService.
#ifndef NORMSWEEP_CLIENT_REPORT_FETCH_H_
#define NORMSWEEP_CLIENT_REPORT_FETCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "client/report/report.h"
#include "client/sweep_client.h"

namespace normsweep::client {

struct FetchReportOptions {
  // The diagnostics of the trials the page draws (two per placement and
  // variant) come from GetTrial, one call each, up to this many trials;
  // above, from one export of the diagnostics table, which streams every
  // trial's rows (11 evaluations x 6 layers for a default trial) to keep
  // those few.
  int max_diagnostics_get_trials = 16;
};

// GetSweep; the trials with their metrics and layer gradient norms from
// ExportSweep, a stream per table instead of a GetTrial per trial
// (client/report/export_reader.h); GetSweepAnalysis; then the diagnostics
// of the trials the page draws only (FetchReportOptions). The trials come
// by index, their lists in GetTrial's order. Metrics carry the step and
// kReportMetricFields only, and a point with none of those is left out.
// What the export does not carry stays unset (Trial's lease, last_* and
// boundary_line, and the attempts): the page shows none of it. NOT_FOUND
// (from the scheduler) for an unknown sweep.
absl::StatusOr<ReportData> FetchReportData(SweepClient& client, int64_t sweep_id,
                                           const FetchReportOptions& options = {});

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_REPORT_FETCH_H_
