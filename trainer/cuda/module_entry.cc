// The CUDA backend ships as a module (libnormsweep_cuda.so) that
// trainer/backend.cc loads with dlopen when a run asks for a cuda device:
// CPU runs never load the CUDA runtime or cuBLAS (half a gigabyte, ~0.4 s per
// process start) and normsweep-train runs on machines without them. These
// are the module's only exported symbols.
#include <new>

#include "trainer/cuda/cuda_backend.h"
#include "trainer/cuda/module_abi.h"

using normsweep::trainer::Backend;
using normsweep::trainer::BackendOptions;
using normsweep::trainer::Status;

extern "C" __attribute__((visibility("default"))) int normsweep_cuda_module_abi() {
  return normsweep::trainer::kCudaModuleAbi;
}

extern "C" __attribute__((visibility("default"))) Backend* normsweep_cuda_create(const BackendOptions* options,
                                                                                  Status* error) {
  auto backend = normsweep::trainer::cuda::CreateCudaBackend(*options);
  if (!backend.ok()) {
    *error = backend.status();
    return nullptr;
  }
  return backend.value().release();
}

extern "C" __attribute__((visibility("default"))) void normsweep_cuda_list(std::vector<std::string>* out) {
  *out = normsweep::trainer::cuda::ListCudaDevices();
}
