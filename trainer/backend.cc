#include "trainer/backend.h"

#include "trainer/cpu/cpu_backend.h"

namespace normsweep::trainer {

StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendOptions& options) {
  if (options.device == "cpu") return cpu::CpuBackend::Create(options);
  if (options.device.rfind("cuda", 0) == 0) {
    return InvalidArgument("device: '" + options.device +
                           "' needs the CUDA backend, which this build of normsweep-train does not have");
  }
  return InvalidArgument("device: unknown device '" + options.device + "' (expected cpu or cuda:N)");
}

std::vector<std::string> ListDevices() { return {"cpu"}; }

}  // namespace normsweep::trainer
