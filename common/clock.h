// Time as a dependency: lease and heartbeat logic takes a Clock& so that tests
// move time with FakeClock instead of sleeping.
#ifndef NORMSWEEP_COMMON_CLOCK_H_
#define NORMSWEEP_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace normsweep {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
};

// Wall-clock time. Thread-safe.
class RealClock : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  static RealClock& Get();
};

// Time that moves only when told. Thread-safe (mu_ guards now_).
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1767225600)) : now_(start) {}
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_CLOCK_H_
