#include "client/progress_view.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace normsweep::client {

std::string FormatDuration(double seconds) {
  if (seconds < 0) return "--";
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

ProgressView::ProgressView(bool live, Clock& clock, std::function<void(const std::string&)> write)
    : live_(live), clock_(clock), write_(std::move(write)), start_(clock.Now()) {}

std::string ProgressView::Line(const v1::Sweep& sweep, int done) {
  const v1::TrialCounts& c = sweep.counts();
  const int total = sweep.trial_count();
  if (first_done_ < 0) first_done_ = done;
  const double elapsed = absl::ToDoubleSeconds(clock_.Now() - start_);
  double eta = -1;
  if (done > first_done_ && elapsed > 0) eta = (total - done) * elapsed / (done - first_done_);
  if (done == total) eta = 0;
  constexpr int kWidth = 30;
  const int filled = total > 0 ? done * kWidth / total : kWidth;
  return absl::StrFormat(
      "sweep %d [%s%s] %d/%d done | %d running | %d pending | %d diverged | %d failed%s | ETA %s", sweep.id(),
      std::string(filled, '#'), std::string(kWidth - filled, '.'), done, total, c.running(), c.pending(),
      c.diverged(), c.failed(), c.cancelled() > 0 ? absl::StrFormat(" | %d cancelled", c.cancelled()) : "",
      FormatDuration(eta));
}

void ProgressView::Update(const v1::Sweep& sweep) {
  const v1::TrialCounts& c = sweep.counts();
  const int done = c.succeeded() + c.diverged() + c.failed() + c.cancelled();
  const std::string line = Line(sweep, done);
  if (live_) {
    write_("\r\033[K" + line);
    return;
  }
  const absl::Time now = clock_.Now();
  if (done == printed_done_ && now - printed_at_ < kQuietInterval) return;
  write_(line + "\n");
  printed_done_ = done;
  printed_at_ = now;
}

void ProgressView::Finish() {
  if (live_) write_("\n");
}

}  // namespace normsweep::client
