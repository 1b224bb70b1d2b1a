#include "tests/report/text_boxes.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/common/read_file.h"
#include "tests/common/subprocess.h"

namespace normsweep::testing {
namespace {

// Runs after the page has been parsed: one tab-separated line per text
// (svg index, aria-label, left, top, right, bottom, content), in a <pre>.
constexpr char kMeasure[] = R"js(<script>
(() => {
  const clean = s => (s || '').replace(/[\t\n\r]/g, ' ');
  const rows = [];
  document.querySelectorAll('svg').forEach((svg, i) => {
    const s = svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(t => {
      const r = t.getBoundingClientRect();
      rows.push([i, clean(svg.getAttribute('aria-label')), r.left - s.left, r.top - s.top, r.right - s.left,
                 r.bottom - s.top, clean(t.textContent)].join('\t'));
    });
  });
  const pre = document.createElement('pre');
  pre.id = 'text-boxes';
  pre.textContent = rows.join('\n');
  document.body.appendChild(pre);
})();
</script>
)js";

std::string FindChromium() {
  if (const char* c = std::getenv("CHROMIUM"); c != nullptr && *c != '\0') return c;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      const std::string candidate = absl::StrCat(dir, "/", name);
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

std::string Unescape(std::string s) {
  return absl::StrReplaceAll(s, {{"&lt;", "<"}, {"&gt;", ">"}, {"&nbsp;", "\u00a0"}, {"&amp;", "&"}});
}

std::string Describe(const TextBox& b) {
  return absl::StrFormat("'%s' [%.1f %.1f %.1f %.1f]", b.text, b.left, b.top, b.right, b.bottom);
}

}  // namespace

absl::StatusOr<std::vector<TextBox>> BrowserTextBoxes(const std::string& html, const std::string& dir) {
  const size_t body_end = html.rfind("</body>");
  if (body_end == std::string::npos) return absl::InvalidArgumentError("the page has no </body>");
  const std::string page = dir + "/page.html";
  std::ofstream(page) << html.substr(0, body_end) << kMeasure << html.substr(body_end);
  const std::string chromium = FindChromium();
  if (chromium.empty()) {
    return absl::FailedPreconditionError(
        "chromium not found: install Debian's chromium (deploy/install-deps.sh) or set CHROMIUM");
  }
  std::string profile = dir + "/profile-XXXXXX";
  if (mkdtemp(profile.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  // A private profile and HOME, as client/report_screenshot.sh runs it; the
  // DOM goes to a file of its own, Chromium's chatter to the log.
  std::vector<std::string> argv = {"/bin/sh", "-c", "out=$1; shift; exec \"$@\" >\"$out\"", "sh", dir + "/dom.html",
                                   chromium, "--headless", "--disable-gpu", "--disable-dev-shm-usage",
                                   "--no-first-run", "--no-default-browser-check", "--user-data-dir=" + profile,
                                   "--dump-dom"};
  if (getuid() == 0) argv.push_back("--no-sandbox");  // Chromium refuses to run as root with its sandbox
  argv.push_back("file://" + page);
  const std::string log = dir + "/chromium.log";
  auto p = Subprocess::Start(argv, {{"HOME", profile}}, log);
  if (!p.ok()) return p.status();
  if (const int rc = p->Wait(120); rc != 0) {
    return absl::InternalError(absl::StrCat(chromium, " --dump-dom exited ", rc, ": ", ReadFile(log)));
  }
  const std::string dom = ReadFile(dir + "/dom.html");
  const std::string open = "<pre id=\"text-boxes\">";
  const size_t start = dom.find(open);
  const size_t end = dom.find("</pre>", start);
  if (start == std::string::npos || end == std::string::npos) {
    return absl::InternalError(absl::StrCat("no text boxes in Chromium's DOM; its log: ", ReadFile(log)));
  }
  std::vector<TextBox> out;
  for (absl::string_view line : absl::StrSplit(
           absl::string_view(dom).substr(start + open.size(), end - start - open.size()), '\n', absl::SkipEmpty())) {
    const std::vector<std::string> f = absl::StrSplit(line, '\t');
    TextBox b;
    if (f.size() != 7 || !absl::SimpleAtoi(f[0], &b.svg) || !absl::SimpleAtod(f[2], &b.left) ||
        !absl::SimpleAtod(f[3], &b.top) || !absl::SimpleAtod(f[4], &b.right) || !absl::SimpleAtod(f[5], &b.bottom)) {
      return absl::InternalError(absl::StrCat("a text box line not understood: ", line));
    }
    b.figure = Unescape(f[1]);
    b.text = Unescape(f[6]);
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<std::string> OverlappingTexts(const std::vector<TextBox>& boxes, double epsilon) {
  std::vector<std::string> out;
  for (size_t i = 0; i < boxes.size(); ++i) {
    for (size_t j = i + 1; j < boxes.size(); ++j) {
      const TextBox& a = boxes[i];
      const TextBox& b = boxes[j];
      if (a.svg != b.svg) continue;
      const double across = std::min(a.right, b.right) - std::max(a.left, b.left);
      const double down = std::min(a.bottom, b.bottom) - std::max(a.top, b.top);
      if (across > epsilon && down > epsilon) {
        out.push_back(absl::StrCat(a.figure, ": ", Describe(a), " and ", Describe(b)));
      }
    }
  }
  return out;
}

}  // namespace normsweep::testing
