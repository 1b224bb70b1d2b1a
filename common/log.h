// One log-line format for the services: an RFC 3339 UTC timestamp with
// milliseconds, the program's name, the message.
//   2026-12-01T08:10:49.123Z normsweep-worker: registered as worker 3
#ifndef NORMSWEEP_COMMON_LOG_H_
#define NORMSWEEP_COMMON_LOG_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/time/time.h"

namespace normsweep {

// "2026-12-01T08:10:49.123Z"
std::string Rfc3339Utc(absl::Time t);

// Writes "<timestamp> <program>: <message>\n" to stderr in one write, so that
// lines of several threads never interleave.
void LogLine(absl::string_view program, absl::string_view message);

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_LOG_H_
