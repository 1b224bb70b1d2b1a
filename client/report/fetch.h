// The data of `normsweep report`, fetched over SweepService.
#ifndef NORMSWEEP_CLIENT_REPORT_FETCH_H_
#define NORMSWEEP_CLIENT_REPORT_FETCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "client/report/report.h"
#include "client/sweep_client.h"

namespace normsweep::client {

// GetSweep, ListTrials, GetTrial for each trial, then GetSweepAnalysis.
// Only the trials whose diagnostics the page draws keep them. NOT_FOUND
// (from the scheduler) for an unknown sweep.
absl::StatusOr<ReportData> FetchReportData(SweepClient& client, int64_t sweep_id);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_REPORT_FETCH_H_
