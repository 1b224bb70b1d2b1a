// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status, which Debian's Abseil
// does not ship, and the one mapping from absl::Status to grpc::Status lives in
// common/grpc_status.h.
#ifndef NORMSWEEP_COMMON_STATUS_MACROS_H_
#define NORMSWEEP_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define NS_STATUS_CONCAT_INNER(a, b) a##b
#define NS_STATUS_CONCAT(a, b) NS_STATUS_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                   \
  do {                                          \
    ::absl::Status ns_status_ = (expr);         \
    if (!ns_status_.ok()) return ns_status_;    \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(NS_STATUS_CONCAT(ns_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#endif  // NORMSWEEP_COMMON_STATUS_MACROS_H_
