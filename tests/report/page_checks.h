// What every rendered report page must be, whatever its data: drawn with
// finite numbers only, and self-contained.
#ifndef NORMSWEEP_TESTS_REPORT_PAGE_CHECKS_H_
#define NORMSWEEP_TESTS_REPORT_PAGE_CHECKS_H_

#include <string>

namespace normsweep::testing {

// Every numeric SVG attribute of the page, and every polyline point, is a
// finite number: NaN never reaches the drawing.
void ExpectFiniteGeometry(const std::string& html);

// Nothing on the page is fetched: no script, no stylesheet or image link.
void ExpectSelfContained(const std::string& html);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_REPORT_PAGE_CHECKS_H_
