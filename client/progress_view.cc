#include "client/progress_view.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace normsweep::client {

std::string FormatDuration(double seconds) {
  if (seconds < 0) return "--";
  const int64_t s = static_cast<int64_t>(std::min(seconds, 1e15) + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string Grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

namespace {

// 1.1e6 -> "1.10M", 52000 -> "52.0k", 900 -> "900".
std::string Scaled(double v) {
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.1fk", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

}  // namespace

std::string ExportProgressLine(const std::string& table, int64_t rows, int64_t total_rows, int64_t bytes,
                               double seconds) {
  std::string bar;
  if (total_rows > 0) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(std::min<int64_t>(rows, total_rows) * kWidth / total_rows);
    bar = absl::StrFormat("[%s%s] ", std::string(filled, '#'), std::string(kWidth - filled, '.'));
  }
  return absl::StrFormat("export %s: %s%s%s rows | %.1f MB | %s rows/s | %s", table, bar, Grouped(rows),
                         total_rows > 0 ? absl::StrCat("/", Grouped(total_rows)) : "", bytes / 1e6,
                         Scaled(seconds > 0 ? rows / seconds : 0), FormatDuration(seconds));
}

bool IsTraining(const v1::Trial& trial) {
  return trial.state() == v1::TRIAL_RUNNING &&
         (trial.last_step() > 0 || trial.has_last_train_loss() || trial.has_last_val_loss());
}

std::string InterruptedWatchMessage(int64_t sweep_id) {
  return absl::StrFormat(
      "\nnormsweep: stopped watching; sweep %d goes on (the scheduler runs it whether or not it is watched)\n"
      "  follow it again: normsweep watch %d\n"
      "  stop it:         normsweep cancel %d\n",
      sweep_id, sweep_id, sweep_id);
}

ProgressView::ProgressView(bool live, Clock& clock, std::function<void(const std::string&)> write)
    : live_(live), clock_(clock), write_(std::move(write)), start_(clock.Now()) {}

std::string ProgressView::Line(const v1::Sweep& sweep, int ended) {
  const v1::TrialCounts& c = sweep.counts();
  const int total = sweep.trial_count();
  if (first_ended_ < 0) first_ended_ = ended;
  const double elapsed = absl::ToDoubleSeconds(clock_.Now() - start_);
  double eta = -1;
  if (ended > first_ended_ && elapsed > 0) eta = (total - ended) * elapsed / (ended - first_ended_);
  if (ended == total) eta = 0;
  constexpr int kWidth = 30;
  const int filled = total > 0 ? ended * kWidth / total : kWidth;
  const int not_started = std::min(static_cast<int>(not_started_.size()), c.running());
  return absl::StrFormat(
      "sweep %d [%s%s] %d/%d done | %d running%s | %d pending | %d diverged | %d failed%s | ETA %s", sweep.id(),
      std::string(filled, '#'), std::string(kWidth - filled, '.'), c.succeeded() + c.diverged() + c.failed(), total,
      c.running() - not_started, not_started > 0 ? absl::StrFormat(" | %d leased, not started", not_started) : "",
      c.pending(), c.diverged(), c.failed(),
      c.cancelled() > 0 ? absl::StrFormat(" | %d cancelled", c.cancelled()) : "", FormatDuration(eta));
}

void ProgressView::Update(const v1::WatchSweepEvent& event) {
  for (const v1::Trial& t : event.trials()) {
    if (t.state() == v1::TRIAL_RUNNING && !IsTraining(t)) {
      not_started_.insert(t.id());
    } else {
      not_started_.erase(t.id());
    }
  }
  const v1::Sweep& sweep = event.sweep();
  const v1::TrialCounts& c = sweep.counts();
  const int ended = c.succeeded() + c.diverged() + c.failed() + c.cancelled();
  const std::string line = Line(sweep, ended);
  if (live_) {
    write_("\r\033[K" + line);
    return;
  }
  const absl::Time now = clock_.Now();
  if (ended == printed_ended_ && now - printed_at_ < kQuietInterval) return;
  write_(line + "\n");
  printed_ended_ = ended;
  printed_at_ = now;
}

void ProgressView::Finish() {
  if (live_) write_("\n");
}

}  // namespace normsweep::client
