// Who may do what on the scheduler's API (issue 25): roles, the role each
// RPC needs, and the token roles file that names the callers.
//
// The file (normsweep-scheduler --token-roles-file, or
// NORMSWEEP_TOKEN_ROLES_FILE) has one caller a line, `#` starting a comment:
//   NAME ROLE SHA256HEX      a bearer token, stored as the hex SHA-256 of its text
//   NAME ROLE cn:COMMON_NAME  under mutual TLS, a client certificate with that subject CN
// ROLE is read, submit or worker. The file holds no secret: only hashes of
// the tokens, so that it can live in a ConfigMap.
#ifndef NORMSWEEP_COMMON_TOKEN_ROLES_H_
#define NORMSWEEP_COMMON_TOKEN_ROLES_H_

#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace normsweep {

// read: the Get*, List* calls, WatchSweep, GetSweepAnalysis, ExportSweep;
// submit: read's and SubmitSweep, CancelSweep; worker: WorkerService only.
// kAll is the single shared API token's (NORMSWEEP_API_TOKEN): every call.
enum class Role { kRead, kSubmit, kWorker, kAll };

// "read", "submit", "worker", "all".
absl::string_view RoleName(Role role);

// Whether a caller holding `held` may make a call that needs `needed`.
bool RoleGrants(Role held, Role needed);

// The role a SweepService or WorkerService method needs, by its name (the
// two services' names are distinct); nullopt for a name no role may call,
// so that a new RPC stays closed until it is given a role here.
std::optional<Role> RoleForMethod(absl::string_view method);

// Lowercase hex SHA-256 of text (OpenSSL's libcrypto).
std::string Sha256Hex(absl::string_view text);

// A caller: the file's NAME (recorded as Sweep.submitted_by/cancelled_by)
// and its role.
struct Caller {
  std::string name;
  Role role = Role::kRead;
};

// One token roles file, parsed. Immutable; reloading makes a new one.
class TokenRoles {
 public:
  // Errors start "SOURCE:LINE: " and quote the bad field, but never a hash
  // field's text (it may be a token pasted by mistake): a duplicate token
  // or CN, a bad role, a bad hash, a bad name, a line without three fields.
  static absl::StatusOr<TokenRoles> Parse(absl::string_view text, absl::string_view source);
  // Reads and parses the file; an unreadable file is an error naming it.
  static absl::StatusOr<TokenRoles> Load(const std::string& path);

  // The caller holding this token (its text, hashed here), or null.
  const Caller* ForToken(absl::string_view token) const;
  // The caller for a client certificate's subject CN, or null.
  const Caller* ForCommonName(absl::string_view common_name) const;

  int tokens() const { return static_cast<int>(by_hash_.size()); }
  int common_names() const { return static_cast<int>(by_common_name_.size()); }

 private:
  std::map<std::string, Caller, std::less<>> by_hash_;         // lowercase hex SHA-256 -> caller
  std::map<std::string, Caller, std::less<>> by_common_name_;  // CN -> caller
};

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_TOKEN_ROLES_H_
