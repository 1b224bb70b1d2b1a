#include "common/flags.h"

#include <algorithm>
#include <cstdio>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/log.h"

namespace normsweep {
namespace {

constexpr size_t kHelpWidth = 100;  // help text is wrapped to this many columns

bool IsHelp(absl::string_view name) {
  return name == "help" || name == "helpfull" || name == "helpshort" || name == "h";
}

// Abseil's built-in flags (--flagfile, --fromenv, --helpfull...) are not the
// program's: they are neither listed nor set here.
bool IsProgramFlag(const absl::CommandLineFlag& flag) {
  return !flag.IsRetired() && !absl::StrContains(flag.Filename(), "absl/flags/");
}

// The program's flag spelled `name` with dashes or with underscores; null
// when there is none (a mixed spelling names none).
absl::CommandLineFlag* FindFlag(absl::string_view name) {
  if (name.empty() || (absl::StrContains(name, '-') && absl::StrContains(name, '_'))) return nullptr;
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(absl::StrReplaceAll(name, {{"-", "_"}}));
  return flag != nullptr && IsProgramFlag(*flag) ? flag : nullptr;
}

// The bool flag that --noNAME, --no-NAME or --no_NAME turns off; null if none.
absl::CommandLineFlag* NegatedBool(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "no")) return nullptr;
  if (!absl::ConsumePrefix(&name, "-")) absl::ConsumePrefix(&name, "_");
  absl::CommandLineFlag* flag = FindFlag(name);
  return flag != nullptr && flag->IsOfType<bool>() ? flag : nullptr;
}

// Abseil's message says "Illegal value 'x' specified for flag 'name'" with
// the underscore spelling, then sometimes "; " and why: keep only the why.
std::string InvalidValue(absl::string_view given, absl::string_view value, const std::string& error) {
  const size_t why = error.find("; ");
  return absl::StrCat("--", given, ": invalid value '", value, "'",
                      why == std::string::npos ? "" : absl::StrCat(" (", error.substr(why + 2), ")"));
}

// text wrapped at kHelpWidth, each line indented by `indent` spaces.
std::string Wrap(absl::string_view text, size_t indent) {
  std::string out, line(indent, ' ');
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (line.size() > indent && line.size() + 1 + word.size() > kHelpWidth) {
      absl::StrAppend(&out, line, "\n");
      line.assign(indent, ' ');
    }
    absl::StrAppend(&line, line.size() > indent ? " " : "", word);
  }
  if (line.size() > indent) absl::StrAppend(&out, line, "\n");
  return out;
}

}  // namespace

std::string DashedFlagName(absl::string_view name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

absl::StatusOr<ParsedFlags> ParseFlags(int argc, const char* const* argv) {
  ParsedFlags parsed;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") {
      parsed.positional.insert(parsed.positional.end(), argv + i + 1, argv + argc);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      parsed.positional.emplace_back(arg);
      continue;
    }
    absl::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);  // Abseil also takes -name
    const size_t eq = body.find('=');
    const absl::string_view name = body.substr(0, eq);
    std::optional<std::string> value;
    if (eq != absl::string_view::npos) value = std::string(body.substr(eq + 1));
    if (IsHelp(name)) {
      parsed.help = true;
      continue;
    }
    absl::CommandLineFlag* flag = FindFlag(name);
    if (flag == nullptr && !value.has_value() && (flag = NegatedBool(name)) != nullptr) {
      value = "false";
    } else if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    } else if (!value.has_value() && flag->IsOfType<bool>()) {
      value = "true";
    } else if (!value.has_value()) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    std::string error;
    if (!flag->ParseFrom(*value, &error)) return absl::InvalidArgumentError(InvalidValue(name, *value, error));
  }
  return parsed;
}

std::string FlagsHelp(absl::string_view usage) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsProgramFlag(*flag)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) { return a->Name() < b->Name(); });
  std::string out(usage);
  if (!out.empty() && out.back() != '\n') out += '\n';
  absl::StrAppend(&out, "\nFlags, with their defaults (the older spelling with underscores, --tls_cert for --tls-cert, "
                        "is also accepted):\n");
  for (const absl::CommandLineFlag* flag : flags) {
    const std::string value = flag->DefaultValue();
    absl::StrAppend(&out, "  --", DashedFlagName(flag->Name()), "=",
                    flag->IsOfType<std::string>() ? absl::StrCat("\"", value, "\"") : value, "\n",
                    Wrap(flag->Help(), 6));
  }
  return out;
}

std::optional<int> ParseFlagsForMain(int argc, char** argv, absl::string_view usage) {
  const absl::string_view program = argc > 0 ? absl::string_view(argv[0]) : "";
  const absl::string_view name = program.substr(program.rfind('/') + 1);  // npos + 1 == 0
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(argc, argv);
  if (!parsed.ok()) {
    LogLine(name, parsed.status().message());
    return 2;
  }
  if (parsed->help) {
    std::fputs(FlagsHelp(usage).c_str(), stdout);
    return 0;
  }
  if (!parsed->positional.empty()) {
    LogLine(name, absl::StrCat("unexpected argument '", parsed->positional[0], "' (flags are --name=value; see --help)"));
    return 2;
  }
  return std::nullopt;
}

}  // namespace normsweep
