// The progress line of `normsweep watch`: a bar of ended trials, the counts
// (done: ended with an outcome of their own; cancelled apart), and an ETA
// from the ending rate since the watch began. Running counts only trials
// that are training: a trial leased but not started (a worker leases its
// slot's next trial before the slot is free; a trainer takes a moment to
// start) has reported no progress, and is counted as "leased, not started".
//
// On a terminal (live) the line is redrawn in place at every update. Written
// to a file or a pipe (a CI log), a line is printed only when the number of
// finished trials changes, or when kQuietInterval has passed since the last
// line, whichever comes first: a long sweep gives a line per trial, not one
// per poll of the stream. The interval is checked at each update (the stream
// sends one whenever a trial progresses), so a line comes at the first update
// after it.
//
// Time comes from the Clock given (RealClock in the CLI, FakeClock in tests);
// text goes to the writer given. Used from one thread (the watch callback).
#ifndef NORMSWEEP_CLIENT_PROGRESS_VIEW_H_
#define NORMSWEEP_CLIENT_PROGRESS_VIEW_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::client {

// "42s", "3m05s", "1h02m"; "--" for a negative (unknown) duration.
std::string FormatDuration(double seconds);

// 1234567 -> "1,234,567".
std::string Grouped(int64_t n);

// The progress line of `normsweep export` (drawn on a terminal's stderr):
// the rows and bytes written, the rate and the time so far, after a bar when
// the table's total is known (total_rows > 0: the trials table of a whole
// sweep), e.g.
//   export metrics: 1,234,567 rows | 41.2 MB | 1.10M rows/s | 1s
std::string ExportProgressLine(const std::string& table, int64_t rows, int64_t total_rows, int64_t bytes,
                               double seconds);

// A RUNNING trial that has reported progress (a step, a loss): training,
// not only leased.
bool IsTraining(const v1::Trial& trial);

// What `normsweep watch ID` says when Ctrl-C stops it: the sweep goes on,
// and how to follow it again or stop it.
std::string InterruptedWatchMessage(int64_t sweep_id);

class ProgressView {
 public:
  static constexpr absl::Duration kQuietInterval = absl::Seconds(30);

  // live: redraw one line in place (stdout is a terminal). write receives
  // the text to print, newlines and terminal escapes included.
  ProgressView(bool live, Clock& clock, std::function<void(const std::string&)> write);

  // A WatchSweep event: the sweep, and the trials changed since the last
  // event (every trial in a stream's first).
  void Update(const v1::WatchSweepEvent& event);
  // Ends the live line; nothing otherwise.
  void Finish();

 private:
  std::string Line(const v1::Sweep& sweep, int ended);

  const bool live_;
  Clock& clock_;
  const std::function<void(const std::string&)> write_;
  const absl::Time start_;
  int first_ended_ = -1;    // ended trials at the first update, for the ETA
  int printed_ended_ = -1;  // ended trials on the last line printed (not live)
  std::set<int64_t> not_started_;  // RUNNING trials without progress, by id
  absl::Time printed_at_;   // when that line was printed
};

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_PROGRESS_VIEW_H_
