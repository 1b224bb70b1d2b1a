// Who a call to the scheduler's API comes from, and whether its role lets it
// make that call. A caller is known by its bearer token (`authorization:
// Bearer <token>`): the single shared API token (NORMSWEEP_API_TOKEN, every
// role) or one of the token roles file's (common/token_roles.h); or, when it
// sends no token, under mutual TLS by its client certificate's subject CN, if
// the file has a cn: line for it. A token that is sent decides: an unknown
// one is refused even with a known certificate.
//
// Thread-safe: the gRPC handlers call Check on their threads while Reload
// (SIGHUP) swaps the table under mu_; a call holds the table it started with.
#ifndef NORMSWEEP_COMMON_AUTHENTICATOR_H_
#define NORMSWEEP_COMMON_AUTHENTICATOR_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/token_roles.h"

namespace normsweep {

class Authenticator {
 public:
  // api_token: the all-roles token ("": none). roles: the token roles file's
  // table (null: no file). With neither, every call is let through.
  explicit Authenticator(std::string api_token = "", std::shared_ptr<const TokenRoles> roles = nullptr)
      : api_token_(std::move(api_token)), roles_(std::move(roles)) {}

  // OK when the caller may call `method` (a SweepService or WorkerService
  // method's name, common/token_roles.h's RoleForMethod), with its name in
  // *caller ("" for the shared API token, or when no token is required).
  // UNAUTHENTICATED when the caller is unknown (no token, or one that is
  // neither the shared token nor in the file); PERMISSION_DENIED naming the
  // role the method needs and the caller's name and role. No message ever
  // holds the token.
  grpc::Status Check(const grpc::ServerContextBase& context, absl::string_view method, std::string* caller) const;

  // The new table for the calls that follow.
  void Reload(std::shared_ptr<const TokenRoles> roles) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether calls need a token (or a known certificate) at all.
  bool enabled() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::shared_ptr<const TokenRoles> roles() const ABSL_LOCKS_EXCLUDED(mu_);
  // The caller, or UNAUTHENTICATED.
  grpc::Status Identify(const grpc::ServerContextBase& context, const TokenRoles* roles, Caller* out) const;

  const std::string api_token_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const TokenRoles> roles_ ABSL_GUARDED_BY(mu_);
};

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_AUTHENTICATOR_H_
