// A bearer token for the scheduler's gRPC API, sent as `authorization:
// Bearer <token>` by the worker and the CLI. The scheduler takes it as the
// single shared token that opens every call, and a token roles file may name
// more tokens, each with a role (common/token_roles.h); common/authenticator.h
// checks them. Health checking and reflection stay open, for load balancers
// and grpcurl's describe. Without TLS (common/tls.h) the token travels in the
// clear.
#ifndef NORMSWEEP_COMMON_API_TOKEN_H_
#define NORMSWEEP_COMMON_API_TOKEN_H_

#include <grpcpp/client_context.h>

#include <string>

#include "absl/status/statusor.h"

namespace normsweep {

// The token from NORMSWEEP_API_TOKEN, else from the file named by
// NORMSWEEP_API_TOKEN_FILE (e.g. a mounted Kubernetes Secret; surrounding
// whitespace stripped), else "" (no token). An unreadable or empty token
// file is an error naming the variable and the file.
absl::StatusOr<std::string> ApiTokenFromEnvironment();

// Adds the authorization header to ctx when token is not empty.
void AttachApiToken(grpc::ClientContext* ctx, const std::string& token);

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_API_TOKEN_H_
