// The page of `normsweep report`: the figures of client/report/figures.h
// with their headings and explanations, inline CSS, one HTML file.
#ifndef NORMSWEEP_CLIENT_REPORT_PAGE_H_
#define NORMSWEEP_CLIENT_REPORT_PAGE_H_

#include <string>

#include "absl/status/status.h"
#include "client/report/report.h"

namespace normsweep::client {

// The page. A sweep with no finished trial gives a page that says so.
std::string RenderReportHtml(const ReportData& data);

// Creates dir (with parents) and writes dir/index.html through a temporary
// file renamed into place. Errors name the path and the reason.
absl::Status WriteReport(const std::string& dir, const std::string& html);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_REPORT_PAGE_H_
