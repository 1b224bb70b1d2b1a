// The one mapping between absl::Status and grpc::Status (same codes, same
// message), used by every gRPC service and client in normsweep.
#ifndef NORMSWEEP_COMMON_GRPC_STATUS_H_
#define NORMSWEEP_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace normsweep {

// Trailing metadata that a scheduler adds to an UNAVAILABLE answer when its
// database is down, so that clients can tell that from a scheduler they
// cannot reach (scheduler/grpc_services.h, client/sweep_client.cc).
inline constexpr char kDatabaseUnavailableKey[] = "normsweep-database-unavailable";

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_GRPC_STATUS_H_
