// Blocking wrapper for a call that answers through a callback.
#ifndef NORMSWEEP_COMMON_WAIT_FOR_H_
#define NORMSWEEP_COMMON_WAIT_FOR_H_

#include <utility>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"

namespace normsweep {

// Runs start(done), where done takes an absl::StatusOr<T> and may be called
// on any thread (or before start returns), and waits until it has been.
template <typename T, typename Start>
absl::StatusOr<T> WaitFor(Start&& start) {
  absl::StatusOr<T> result;
  absl::Notification finished;
  start([&](absl::StatusOr<T> r) {
    result = std::move(r);
    finished.Notify();
  });
  finished.WaitForNotification();
  return result;
}

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_WAIT_FOR_H_
