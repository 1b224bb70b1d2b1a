// Hand-made report data with the analysis views' figures for its trials,
// computed by the real views in a throwaway PostgreSQL
// (tests/common/views_fixture.h), as FetchReportData gets them from the
// scheduler.
#ifndef NORMSWEEP_TESTS_REPORT_VIEWS_ANALYSIS_H_
#define NORMSWEEP_TESTS_REPORT_VIEWS_ANALYSIS_H_

#include "client/report/report.h"

namespace normsweep::testing {

// d with its analysis replaced by the views' (near-best within tolerance);
// d unchanged after failing the test.
client::ReportData WithAnalysis(client::ReportData d, double tolerance = client::kNearBestTolerance);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_REPORT_VIEWS_ANALYSIS_H_
