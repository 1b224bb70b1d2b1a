// The boxes of a report page's SVG texts as headless Chromium lays them out
// (a script added to the page reads each <text>'s getBoundingClientRect and
// writes them into the DOM, which --dump-dom prints), and the pairs of texts
// of one figure that overlap. Chromium is Debian's `chromium`
// (deploy/install-deps.sh); CHROMIUM names another binary.
#ifndef NORMSWEEP_TESTS_REPORT_TEXT_BOXES_H_
#define NORMSWEEP_TESTS_REPORT_TEXT_BOXES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace normsweep::testing {

struct TextBox {
  int svg = 0;         // the page's n-th <svg>, in document order
  std::string figure;  // that SVG's aria-label
  std::string text;    // the text's content
  double left = 0, top = 0, right = 0, bottom = 0;  // pixels from the SVG's top left corner
};

// Writes html with the measuring script to dir/page.html, loads it in
// headless Chromium and returns the box of every <text> of every <svg>.
absl::StatusOr<std::vector<TextBox>> BrowserTextBoxes(const std::string& html, const std::string& dir);

// Texts of one SVG whose boxes intersect by more than epsilon pixels both
// across and down, as "figure: 'a' [l t r b] and 'b' [l t r b]" lines.
std::vector<std::string> OverlappingTexts(const std::vector<TextBox>& boxes, double epsilon);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_REPORT_TEXT_BOXES_H_
