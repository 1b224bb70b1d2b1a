// The `normsweep workers` table: one row per registered worker with its
// devices summarised, whether it is live and how long ago it was heard from.
// Pure functions (the caller passes "now"), so tests need no scheduler.
#ifndef NORMSWEEP_CLIENT_WORKERS_TABLE_H_
#define NORMSWEEP_CLIENT_WORKERS_TABLE_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::client {

// Devices counted by kind, in first-seen order: {"cpu", "cpu"} -> "2 x cpu",
// {"cuda:0", "cuda:1", "cpu"} -> "2 x cuda, 1 x cpu"; none -> "-".
std::string SummariseDevices(const google::protobuf::RepeatedPtrField<std::string>& devices);

// "3s ago", "4m05s ago", "2h10m ago", "3d04h ago"; a time in the future
// (clock skew between hosts) reads "0s ago".
std::string FormatAge(absl::Duration age);

// Header and one line per worker, in the given order; a superseded
// registration reads "no, restarted as ID" in the live column.
std::string RenderWorkersTable(const std::vector<v1::Worker>& workers, absl::Time now);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_WORKERS_TABLE_H_
