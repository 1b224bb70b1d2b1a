// The attempts table of `normsweep trial N`: one line per ended attempt of
// the trial (GetTrialResponse.attempts), what it left the trial in and why.
// A pure function, so tests need no scheduler.
#ifndef NORMSWEEP_CLIENT_ATTEMPTS_TABLE_H_
#define NORMSWEEP_CLIENT_ATTEMPTS_TABLE_H_

#include <string>

#include "google/protobuf/repeated_ptr_field.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::client {

// "" without attempts; else a header and one line each. "counted as": the
// interruption's cause (TrialAttempt.interruption), "own failure" (counted
// against max_attempts), or "-" (the attempt ended the trial itself):
//   attempt  worker  ended                 then       counted as        reason
//   1        3       2026-12-01T08:10:49Z  re-queued  external_signal   normsweep-train killed by signal 9 ...
std::string RenderAttemptsTable(const google::protobuf::RepeatedPtrField<v1::TrialAttempt>& attempts);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_ATTEMPTS_TABLE_H_
