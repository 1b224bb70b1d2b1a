// `normsweep submit` from flags: the SweepSpec built directly from
// --name, --placements, --warmup-steps, --lrs, --seeds, --max-attempts,
// --priority, --max-concurrent and --set FIELD=VALUE. Pure functions;
// errors name the flag (and the TrainConfig field for --set).
#ifndef NORMSWEEP_CLIENT_SWEEP_FLAGS_H_
#define NORMSWEEP_CLIENT_SWEEP_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::client {

// The spec from flags, without a sweep file. --name is required; lists are
// comma-separated (empty items skipped); --seeds and --warmup-steps default
// to 0 as a sweep file's seeds and warmup_steps do (FillAxisDefaults).
absl::StatusOr<v1::SweepSpec> SpecFromFlags(const CliArgs& args);

// Each --set FIELD=VALUE sets the TrainConfig field of that name (its .proto
// name, or its JSON name), VALUE parsed by the field's type: integers,
// finite numbers, true/false, or text as it is. An unknown field's error
// names the closest field.
absl::Status ApplySetFlags(const std::vector<std::string>& sets, v1::TrainConfig* config);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_SWEEP_FLAGS_H_
