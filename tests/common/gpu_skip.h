// The GPU skip of tests/gpu: a GPU test skips, saying why, when the machine
// has no usable CUDA device, and only then. Header-only: a trainer-only
// build (NORMSWEEP_TRAINER_ONLY, bare GPU machines) builds tests/gpu without
// the rest of tests/common.
#ifndef NORMSWEEP_TESTS_COMMON_GPU_SKIP_H_
#define NORMSWEEP_TESTS_COMMON_GPU_SKIP_H_

#include <gtest/gtest.h>

#include <string>

#include "trainer/backend.h"

namespace normsweep::testing {

// Empty when cuda:0 is usable, else why not (no device, no driver, the
// module not loadable), as MakeBackend says it. Asked once per process.
inline std::string WhyNoGpu() {
  static const std::string why = [] {
    if (trainer::ListDevices().size() > 1) return std::string();
    trainer::BackendOptions o;
    o.device = "cuda:0";
    o.model.layers = 1;
    auto b = trainer::MakeBackend(o);
    return b.ok() ? std::string("cuda:0 works but is not listed") : std::string(b.status().message());
  }();
  return why;
}

}  // namespace normsweep::testing

// In a test body: skips the test when there is no usable GPU; `what` names
// the checks that need one.
#define SKIP_WITHOUT_GPU(what)                                                                        \
  if (const std::string why = ::normsweep::testing::WhyNoGpu(); !why.empty()) {                       \
    GTEST_SKIP() << "no usable GPU, " << (what) << " need one (run tests/gpu/run-on-gpu.sh on a GPU " \
                 << "machine): " << why;                                                              \
  }

#endif  // NORMSWEEP_TESTS_COMMON_GPU_SKIP_H_
