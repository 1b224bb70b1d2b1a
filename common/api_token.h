// A shared-secret bearer token for the scheduler's gRPC API. When the
// scheduler is given one, every SweepService and WorkerService call must
// carry `authorization: Bearer <token>` (health checking and reflection stay
// open, for load balancers and grpcurl's describe); the worker and the CLI
// send it. The channel itself is not encrypted: run it on a private network
// or behind a TLS-terminating proxy (deploy/README.md).
#ifndef NORMSWEEP_COMMON_API_TOKEN_H_
#define NORMSWEEP_COMMON_API_TOKEN_H_

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

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

// OK when token is empty or the call carries exactly it; UNAUTHENTICATED
// (saying whether the header was missing or wrong, never echoing it)
// otherwise. The comparison takes the same time wherever the strings differ.
grpc::Status CheckApiToken(const grpc::ServerContextBase& ctx, const std::string& token);

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_API_TOKEN_H_
