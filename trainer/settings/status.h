// A small error type for the trainer core.
//
// The core (model, ops, optimizer, data, checkpoints, training loop) depends
// only on the C++ standard library and a BLAS, so that the CUDA build also
// works on a bare GPU machine without Abseil or protobuf. Front ends convert
// Status to absl::Status at the module boundary (proto/schema/train_config.h).
#ifndef NORMSWEEP_TRAINER_SETTINGS_STATUS_H_
#define NORMSWEEP_TRAINER_SETTINGS_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace normsweep::trainer {

enum class StatusCode { kOk = 0, kInvalidArgument, kNotFound, kDataLoss, kInternal, kCancelled };

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status DataLoss(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT
  StatusOr(T value) : value_(std::move(value)) {}                                   // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() { assert(ok()); return *value_; }
  const T& value() const { assert(ok()); return *value_; }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace normsweep::trainer

#define NS_TRAINER_CONCAT_INNER(a, b) a##b
#define NS_TRAINER_CONCAT(a, b) NS_TRAINER_CONCAT_INNER(a, b)

#define TRAINER_RETURN_IF_ERROR(expr)                          \
  do {                                                         \
    ::normsweep::trainer::Status ns_status_ = (expr);          \
    if (!ns_status_.ok()) return ns_status_;                   \
  } while (0)

#define TRAINER_ASSIGN_OR_RETURN(lhs, expr) \
  TRAINER_ASSIGN_OR_RETURN_IMPL(NS_TRAINER_CONCAT(ns_statusor_, __LINE__), lhs, expr)
#define TRAINER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp.value())

#endif  // NORMSWEEP_TRAINER_SETTINGS_STATUS_H_
