#include "common/authenticator.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace normsweep {
namespace {

constexpr char kHeader[] = "authorization";
constexpr char kBearer[] = "Bearer ";

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

grpc::Status Unauthenticated(std::string message) {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::move(message));
}

// The verified client certificate's subject CN ("" without one).
std::string PeerCommonName(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::string();
  std::vector<grpc::string_ref> names = auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  return names.empty() ? std::string() : std::string(names[0].data(), names[0].size());
}

}  // namespace

std::shared_ptr<const TokenRoles> Authenticator::roles() const {
  absl::MutexLock lock(&mu_);
  return roles_;
}

void Authenticator::Reload(std::shared_ptr<const TokenRoles> roles) {
  absl::MutexLock lock(&mu_);
  roles_ = std::move(roles);
}

bool Authenticator::enabled() const { return !api_token_.empty() || roles() != nullptr; }

grpc::Status Authenticator::Identify(const grpc::ServerContextBase& context, const TokenRoles* roles,
                                     Caller* out) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kHeader);
  if (it != metadata.end()) {
    const absl::string_view value(it->second.data(), it->second.size());
    if (!absl::StartsWith(value, kBearer)) {
      return Unauthenticated("the authorization header is not 'Bearer <API token>'");
    }
    const absl::string_view token = value.substr(sizeof(kBearer) - 1);
    if (!api_token_.empty() && ConstantTimeEquals(token, api_token_)) {
      *out = Caller{"", Role::kAll};
      return grpc::Status::OK;
    }
    // The file holds hashes: a lookup's timing says nothing about a token.
    if (const Caller* caller = roles != nullptr ? roles->ForToken(token) : nullptr; caller != nullptr) {
      *out = *caller;
      return grpc::Status::OK;
    }
    return Unauthenticated("unknown API token (authorization: Bearer)");
  }
  if (roles != nullptr && roles->common_names() > 0) {
    const std::string cn = PeerCommonName(context);
    if (const Caller* caller = cn.empty() ? nullptr : roles->ForCommonName(cn); caller != nullptr) {
      *out = *caller;
      return grpc::Status::OK;
    }
    if (!cn.empty()) {
      return Unauthenticated(absl::StrCat("client certificate CN '", cn,
                                          "' has no line in the token roles file, and the call carries no API token"));
    }
  }
  return Unauthenticated("this scheduler requires an API token: set NORMSWEEP_API_TOKEN (authorization: Bearer)");
}

grpc::Status Authenticator::Check(const grpc::ServerContextBase& context, absl::string_view method,
                                  std::string* caller) const {
  caller->clear();
  const std::shared_ptr<const TokenRoles> table = roles();
  if (api_token_.empty() && table == nullptr) return grpc::Status::OK;
  Caller who;
  if (grpc::Status status = Identify(context, table.get(), &who); !status.ok()) return status;
  const std::optional<Role> needed = RoleForMethod(method);
  if (!needed.has_value()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, absl::StrCat(method, ": no role may call it"));
  }
  if (!RoleGrants(who.role, *needed)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(method, " needs the '", RoleName(*needed), "' role; '", who.name, "' has '",
                                     RoleName(who.role), "'"));
  }
  *caller = std::move(who.name);
  return grpc::Status::OK;
}

}  // namespace normsweep
