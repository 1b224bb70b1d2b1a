// One spelling for the flags of the programs that define them with
// ABSL_FLAG (normsweep-scheduler, normsweep-worker, the bench programs):
// dashes (--tls-cert) are the canonical spelling, the underscores Abseil
// declares them with (--tls_cert) an alias, and --help lists them with
// dashes. Reads and sets Abseil's flag registry: call from main's thread
// before any other thread starts.
#ifndef NORMSWEEP_COMMON_FLAGS_H_
#define NORMSWEEP_COMMON_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace normsweep {

// The canonical spelling of an ABSL_FLAG's name: "tls_cert" -> "tls-cert".
std::string DashedFlagName(absl::string_view name);

struct ParsedFlags {
  bool help = false;                    // --help, --helpfull or -h was given
  std::vector<std::string> positional;  // arguments that are not flags, and all after "--"
};

// Sets the program's flags from argv[1..]: --name=VALUE, --name VALUE, and
// for a bool also --name and --noname (--no-name). A name is spelled with
// dashes or with underscores throughout, not a mix. An unknown flag, a
// missing or unparsable value: InvalidArgument naming the flag as given.
absl::StatusOr<ParsedFlags> ParseFlags(int argc, const char* const* argv);

// usage, then the program's own flags (not Abseil's built-in ones) sorted,
// with dashes, each with its default and help text.
std::string FlagsHelp(absl::string_view usage);

// For main: parses argv. After --help (help on stdout), after an error and
// on any positional argument (a message on stderr), the status main should
// exit with (0, 2); nullopt to go on.
std::optional<int> ParseFlagsForMain(int argc, char** argv, absl::string_view usage);

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_FLAGS_H_
