#include "common/token_roles.h"

#include <openssl/evp.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace normsweep {
namespace {

constexpr char kCommonNamePrefix[] = "cn:";
constexpr size_t kMaxNameLength = 64;

std::optional<Role> RoleFromName(absl::string_view name) {
  if (name == "read") return Role::kRead;
  if (name == "submit") return Role::kSubmit;
  if (name == "worker") return Role::kWorker;
  return std::nullopt;
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' && c != '@') {
      return false;
    }
  }
  return true;
}

bool IsSha256Hex(absl::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Up to the first blank, and the rest with leading blanks removed.
std::pair<absl::string_view, absl::string_view> NextField(absl::string_view s) {
  const size_t end = s.find_first_of(" \t");
  if (end == absl::string_view::npos) return {s, {}};
  return {s.substr(0, end), absl::StripLeadingAsciiWhitespace(s.substr(end))};
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kSubmit:
      return "submit";
    case Role::kWorker:
      return "worker";
    case Role::kAll:
      return "all";
  }
  return "?";
}

bool RoleGrants(Role held, Role needed) {
  return held == Role::kAll || held == needed || (held == Role::kSubmit && needed == Role::kRead);
}

std::optional<Role> RoleForMethod(absl::string_view method) {
  static const auto* const roles = new std::map<absl::string_view, Role>{
      // SweepService
      {"SubmitSweep", Role::kSubmit},
      {"CancelSweep", Role::kSubmit},
      {"GetSweep", Role::kRead},
      {"ListSweeps", Role::kRead},
      {"ListTrials", Role::kRead},
      {"GetTrial", Role::kRead},
      {"WatchSweep", Role::kRead},
      {"ListWorkers", Role::kRead},
      {"GetSweepAnalysis", Role::kRead},
      {"ExportSweep", Role::kRead},
      // WorkerService
      {"RegisterWorker", Role::kWorker},
      {"LeaseTrial", Role::kWorker},
      {"Heartbeat", Role::kWorker},
      {"ReportProgress", Role::kWorker},
      {"StreamProgress", Role::kWorker},
      {"FinishTrial", Role::kWorker},
  };
  auto it = roles->find(method);
  if (it == roles->end()) return std::nullopt;
  return it->second;
}

std::string Sha256Hex(absl::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // EVP_Digest fails only when OpenSSL cannot allocate a context.
  if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr) != 1) return std::string();
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
}

absl::StatusOr<TokenRoles> TokenRoles::Parse(absl::string_view text, absl::string_view source) {
  TokenRoles roles;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    const auto error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", number, ": ", what));
    };
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    auto [name, rest] = NextField(line);
    auto [role_name, credential] = NextField(rest);
    if (role_name.empty() || credential.empty()) {
      return error(absl::StrCat("expected NAME ROLE SHA256HEX or NAME ROLE cn:COMMON_NAME, got ",
                                role_name.empty() ? "one field" : "two fields"));
    }
    if (!ValidName(name)) {
      return error(absl::StrCat("name '", name.substr(0, kMaxNameLength), "' must be 1-", kMaxNameLength,
                                " letters, digits, '.', '_', '-' or '@'"));
    }
    const std::optional<Role> role = RoleFromName(role_name);
    if (!role.has_value()) {
      return error(absl::StrCat("role '", role_name.substr(0, 32), "' is not read, submit or worker"));
    }
    Caller caller{std::string(name), *role};
    if (absl::StartsWith(credential, kCommonNamePrefix)) {
      const absl::string_view cn = absl::StripLeadingAsciiWhitespace(credential.substr(sizeof(kCommonNamePrefix) - 1));
      if (cn.empty()) return error("cn: names no common name");
      if (!roles.by_common_name_.emplace(std::string(cn), caller).second) {
        return error(absl::StrCat("common name '", cn, "' appears twice"));
      }
      continue;
    }
    // Not quoted: a token pasted here by mistake must not reach the log.
    if (!IsSha256Hex(credential)) {
      return error(absl::StrCat("the token of '", name, "' is not 64 hex digits (a SHA-256) or cn:COMMON_NAME (",
                                credential.size(), " characters; hash a token with: printf %s TOKEN | sha256sum)"));
    }
    if (!roles.by_hash_.emplace(absl::AsciiStrToLower(credential), caller).second) {
      return error(absl::StrCat("the token of '", name, "' appears twice"));
    }
  }
  return roles;
}

absl::StatusOr<TokenRoles> TokenRoles::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("token roles file ", path, ": cannot read"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat("token roles file ", path, ": cannot read"));
  return Parse(ss.str(), path);
}

const Caller* TokenRoles::ForToken(absl::string_view token) const {
  auto it = by_hash_.find(Sha256Hex(token));
  return it == by_hash_.end() ? nullptr : &it->second;
}

const Caller* TokenRoles::ForCommonName(absl::string_view common_name) const {
  auto it = by_common_name_.find(common_name);
  return it == by_common_name_.end() ? nullptr : &it->second;
}

}  // namespace normsweep
