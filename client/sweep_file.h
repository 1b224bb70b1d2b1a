// Sweep files: what users write by hand (YAML) or generate (JSON), parsed
// into normsweep.v1.SweepSpec through protobuf's JSON mapping, so that the
// file has exactly the schema's field names (snake_case) and nothing else.
#ifndef NORMSWEEP_CLIENT_SWEEP_FILE_H_
#define NORMSWEEP_CLIENT_SWEEP_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::client {

// YAML text (JSON is YAML too) to SweepSpec, with FillAxisDefaults.
// Errors name the line (YAML syntax) or the field (wrong type); an unknown
// field's error names its line and column, the message it is not a field of,
// and the closest field name ("line 9, column 3: unknown field 'lr_maximum'
// in boundary_search (BoundarySearch); did you mean 'lr_max'?").
absl::StatusOr<v1::SweepSpec> SweepSpecFromYaml(const std::string& text);

// The axes' defaults where the spec leaves them empty, the same for a sweep
// file and for flags: seeds [0], and warmup_steps [0] unless a random search
// samples the warm-up.
void FillAxisDefaults(v1::SweepSpec* spec);

// Reads FILE.yaml, FILE.yml or FILE.json; errors start with the path.
absl::StatusOr<v1::SweepSpec> LoadSweepSpec(const std::string& path);

// YAML to JSON text (exposed for tests): plain scalars that read as numbers,
// booleans or null stay bare; quoted scalars and everything else are strings.
absl::StatusOr<std::string> YamlToJson(const std::string& text);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_SWEEP_FILE_H_
