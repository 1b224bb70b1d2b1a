// How the scheduler's checks say what is wrong: INVALID_ARGUMENT naming the
// field ("spec.peak_lrs[3]: ..."), a stored string's limits, and numbers as
// the shortest text that reads back. Shared by validation.h and sweep_spec.h.
#ifndef NORMSWEEP_SCHEDULER_FIELD_ERRORS_H_
#define NORMSWEEP_SCHEDULER_FIELD_ERRORS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace normsweep::scheduler {

// "field: what" as INVALID_ARGUMENT.
absl::Status Invalid(const std::string& field, const std::string& what);

// status with its message prefixed by where it came from ("spec.base: lr:
// must be > 0"); OK stays OK.
absl::Status Within(const std::string& where, const absl::Status& status);

// A string that is stored: at most max_length characters and no NUL
// (PostgreSQL's text and jsonb hold none; the statement that stores a group
// of calls would fail for all of them).
absl::Status CheckStoredText(const std::string& field, const std::string& value, size_t max_length);

// The shortest decimal text that reads back as d ("0.5", not "0.50000000000000000").
std::string ShortestDouble(double d);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_FIELD_ERRORS_H_
