// The instant the store and view tests run at (2026-01-01 00:00 UTC): the
// stores are given the time, so leases and stored times read the same in
// every run. Header-only.
#ifndef NORMSWEEP_TESTS_COMMON_TEST_TIME_H_
#define NORMSWEEP_TESTS_COMMON_TEST_TIME_H_

#include "absl/time/time.h"

namespace normsweep::testing {

inline const absl::Time kT0 = absl::FromUnixSeconds(1767225600);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_TEST_TIME_H_
