// Command-line parsing for our subcommand-style tools (normsweep,
// normsweep-train): positional words, then "--name value" or "--name=value"
// flags; flags listed as bare take no value. Header-only, standard C++ only.
#ifndef NORMSWEEP_COMMON_CLI_ARGS_H_
#define NORMSWEEP_COMMON_CLI_ARGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

namespace normsweep {

struct CliArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;  // name without dashes -> value ("" for bare flags)
  std::vector<std::string> order;            // flag names in the order given
  std::map<std::string, std::vector<std::string>> all;  // every value of repeated flags (--set a=1 --set b=2)

  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const {
    auto it = flags.find(name);
    return it == flags.end() ? fallback : it->second;
  }
  std::vector<std::string> All(const std::string& name) const {
    auto it = all.find(name);
    return it == all.end() ? std::vector<std::string>{} : it->second;
  }
};

// Returns false with *error set ("--lr needs a value") on malformed input.
inline bool ParseCliArgs(int argc, char** argv, const std::set<std::string>& bare, CliArgs* args,
                         std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() < 3 || a.rfind("--", 0) != 0) {
      args->positional.push_back(a);
      continue;
    }
    a = a.substr(2);
    std::string value;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (bare.count(a) == 0) {
      if (i + 1 >= argc) {
        *error = "--" + a + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    args->flags[a] = value;
    args->all[a].push_back(value);
    args->order.push_back(a);
  }
  return true;
}

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_CLI_ARGS_H_
