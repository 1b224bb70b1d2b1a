#include "common/log.h"

#include <errno.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace normsweep {

std::string Rfc3339Utc(absl::Time t) { return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone()); }

void LogLine(absl::string_view program, absl::string_view message) {
  std::string line = absl::StrCat(Rfc3339Utc(absl::Now()), " ", program, ": ", message, "\n");
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to log to
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace normsweep
