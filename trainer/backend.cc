#include "trainer/backend.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "trainer/cpu/cpu_backend.h"
#ifdef NORMSWEEP_HAVE_CUDA
#include <dlfcn.h>
#include <unistd.h>

#include "trainer/cuda/module_abi.h"
#endif

namespace normsweep::trainer {

#ifdef NORMSWEEP_HAVE_CUDA
namespace {

constexpr char kCudaModuleName[] = "libnormsweep_cuda.so";

struct CudaModule {
  CudaCreateFn create = nullptr;
  CudaListFn list = nullptr;
  std::string error;  // why it could not be loaded
};

std::string ExecutableDirectory() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// Where the module may be: $NORMSWEEP_CUDA_MODULE, beside the executable,
// ../lib from it (an install), the build tree, then the loader's own path.
std::vector<std::string> ModuleCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("NORMSWEEP_CUDA_MODULE"); env != nullptr && *env != 0) {
    out.emplace_back(env);
    return out;
  }
  const std::string dir = ExecutableDirectory();
  if (!dir.empty()) {
    out.push_back(dir + "/" + kCudaModuleName);
    out.push_back(dir + "/../lib/" + kCudaModuleName);
  }
  out.emplace_back(NORMSWEEP_CUDA_MODULE_BUILD_PATH);
  out.emplace_back(kCudaModuleName);
  return out;
}

const CudaModule& LoadCudaModule() {
  static const CudaModule module = [] {
    CudaModule m;
    std::string tried;
    for (const std::string& path : ModuleCandidates()) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* why = dlerror();
        tried += "\n  " + path + ": " + (why != nullptr ? why : "not loadable");
        continue;
      }
      auto abi = reinterpret_cast<CudaModuleAbiFn>(dlsym(handle, "normsweep_cuda_module_abi"));
      if (abi == nullptr || abi() != kCudaModuleAbi) {
        tried += "\n  " + path + ": built from a different normsweep version (rebuild it)";
        continue;  // never dlclose: harmless, and keeps the loader simple
      }
      m.create = reinterpret_cast<CudaCreateFn>(dlsym(handle, "normsweep_cuda_create"));
      m.list = reinterpret_cast<CudaListFn>(dlsym(handle, "normsweep_cuda_list"));
      if (m.create != nullptr && m.list != nullptr) return m;
      tried += "\n  " + path + ": entry points missing";
    }
    m.error = std::string("the CUDA backend module ") + kCudaModuleName + " could not be loaded:" + tried;
    return m;
  }();
  return module;
}

}  // namespace
#endif

StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendOptions& options) {
  if (options.device == "cpu") return cpu::CpuBackend::Create(options);
  if (options.device.rfind("cuda", 0) == 0) {
#ifdef NORMSWEEP_HAVE_CUDA
    const CudaModule& module = LoadCudaModule();
    if (module.create == nullptr) return InvalidArgument("device: '" + options.device + "' needs " + module.error);
    Status error;
    Backend* backend = module.create(&options, &error);
    if (backend == nullptr) return error;
    return std::unique_ptr<Backend>(backend);
#endif
    return InvalidArgument("device: '" + options.device +
                           "' needs the CUDA backend, which this build of normsweep-train does not have");
  }
  return InvalidArgument("device: unknown device '" + options.device + "' (expected cpu or cuda:N)");
}

std::vector<std::string> ListDevices() {
  std::vector<std::string> devices = {"cpu"};
#ifdef NORMSWEEP_HAVE_CUDA
  // No module (or no driver) means no GPU to list, not an error.
  const CudaModule& module = LoadCudaModule();
  if (module.list != nullptr) {
    std::vector<std::string> gpus;
    module.list(&gpus);
    for (std::string& d : gpus) devices.push_back(std::move(d));
  }
#endif
  return devices;
}

}  // namespace normsweep::trainer
