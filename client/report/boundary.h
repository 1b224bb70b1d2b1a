// The report's figure for boundary_search sweeps: max trainable lr (log y)
// against warm-up steps, one line per placement (and per variant), each
// point the median seed's largest trainable lr with its bracket [L, U) as
// an error bar; a line trainable nowhere is marked at U (below lr_min), one
// trainable everywhere at L with an open bar upwards. Inline SVG from
// GetSweepAnalysisResponse.boundary (summarised by SummariseBoundary).
#ifndef NORMSWEEP_CLIENT_REPORT_BOUNDARY_H_
#define NORMSWEEP_CLIENT_REPORT_BOUNDARY_H_

#include <string>

#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::client {

// The chart alone; "" without boundary lines.
std::string BoundarySvg(const v1::GetSweepAnalysisResponse& analysis);
// The report's section (heading, explanation, chart, and the table of
// `normsweep results`); "" without boundary lines.
std::string BoundaryReportSection(const v1::GetSweepAnalysisResponse& analysis);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_REPORT_BOUNDARY_H_
