// The usage of `normsweep`: one entry per command (what `normsweep COMMAND
// --help` prints), and the whole (`normsweep --help`) made of them, so that
// each command's text is written once.
#ifndef NORMSWEEP_CLIENT_CLI_USAGE_H_
#define NORMSWEEP_CLIENT_CLI_USAGE_H_

#include <optional>
#include <string>
#include <vector>

namespace normsweep::client {

// The commands, in the order the usage lists them.
std::vector<std::string> CommandNames();

// `normsweep COMMAND --help`: the command's synopsis and what it does, then
// the flags every command takes; nullopt for an unknown command.
std::optional<std::string> CommandUsage(const std::string& command);

// `normsweep --help`: every command, the flags for every command, sweep files.
std::string FullUsage();

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_CLI_USAGE_H_
